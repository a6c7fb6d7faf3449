# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Configuration options: ``[filtering]``, ``[filtering:mongodb]`` and
``[filtering:delivery]``.

``list_opts`` is the ``oslo.config.opts`` entry point, so
``oslo-config-generator --namespace zaqar_filtering`` documents them.
"""

import dataclasses
import os

from oslo_config import cfg

from zaqar_filtering.policy.limits import Limits
from zaqar_filtering.policy.retry import RetrySettings

GROUP_NAME = 'filtering'
MONGODB_GROUP_NAME = 'filtering:mongodb'
DELIVERY_GROUP_NAME = 'filtering:delivery'

_LIMIT_HELP = {
    'max_tags': 'Most tags (filter_policies) on a subscription or a message.',
    'max_tag_length': 'Most characters in one tag.',
    'max_binding_keys': 'Most binding keys on a subscription.',
    'max_key_bytes': 'Most UTF-8 bytes in a binding key or a routing key.',
    'max_key_words': 'Most dot-separated words in a binding key or a '
                     'routing key.',
    'max_policy_keys': 'Most attribute names (leaf keys) in one SNS filter '
                       'policy.',
    'max_policy_combinations': 'Most value combinations in one SNS filter '
                               'policy, counted as Amazon SNS counts them.',
    'max_policy_bytes': 'Most bytes of one SNS filter policy as compact '
                        'JSON.',
    'max_policy_number': 'Largest absolute value of a number in an SNS '
                         'filter policy.',
    'max_policy_decimals': 'Most digits after the decimal point of a number '
                           'in an SNS filter policy.',
    'max_ordering_key_length': 'Most characters in the ordering_key of a '
                               'message.',
}

LIMIT_OPTS = [
    cfg.IntOpt(field.name, default=field.default, min=1,
               help=_LIMIT_HELP[field.name])
    for field in dataclasses.fields(Limits)
]

CACHE_OPTS = [
    cfg.FloatOpt('matcher_cache_seconds', default=10.0, min=0,
                 help='Seconds a queue\'s compiled matcher is reused before '
                      'its subscriptions are listed again, in the '
                      'background. Changes made through the API take effect '
                      'for the next post whatever this is, in every server '
                      'process when the store keeps shared versions (redis '
                      'or MongoDB message store, or the mongodb policy '
                      'store; then the queue is listed again every 300 s at '
                      'most often, for changes made around the API). '
                      'Without shared versions, this bounds how long a '
                      'change made through another server process takes to '
                      'apply.'),
]

DELIVERY_OPTS = [
    cfg.FloatOpt('delivery_timeout_seconds', default=10.0, min=0.1,
                 help='Seconds a webhook delivery waits for a connection and '
                      'then for an answer before it counts as failed.'),
]

STORE_OPTS = [
    cfg.StrOpt('policy_store', default='subscriptions',
               help='Where the filter policies and the per-queue versions '
                    'are kept: "subscriptions" (Zaqar\'s own subscription '
                    'store, nothing extra to run) or "mongodb" (see '
                    '[filtering:mongodb]). A driver of the '
                    'zaqar_filtering.policy_stores entry point namespace.'),
]

MONGODB_OPTS = [
    cfg.StrOpt('uri', secret=True,
               help='MongoDB connection URI of the policy store, e.g. '
                    'mongodb://user:password@db1:27017,db2:27017/'
                    '?replicaSet=rs0. Required when policy_store is '
                    'mongodb.'),
    cfg.StrOpt('database', default='zaqar_filtering',
               help='Database of the policy store.'),
    cfg.StrOpt('collection', default='policies',
               help='Collection of policy documents, one per '
                    'subscription.'),
    cfg.StrOpt('versions_collection', default='policy_versions',
               help='Collection of per-queue version documents.'),
    cfg.FloatOpt('connect_timeout_seconds', default=2.0, min=0.1,
                 help='Seconds to wait for a connection to MongoDB.'),
    cfg.FloatOpt('server_selection_timeout_seconds', default=2.0, min=0.1,
                 help='Seconds to wait for a usable MongoDB server before '
                      'the store counts as unavailable.'),
    cfg.FloatOpt('socket_timeout_seconds', default=5.0, min=0.1,
                 help='Seconds to wait for an answer from MongoDB.'),
]

_RETRY_HELP = {
    'backoff_retries': 'Retries of a failed delivery under the backoff '
                       'notify strategy before the message is dropped for '
                       'that subscriber.',
    'backoff_min_seconds': 'Shortest wait before a backoff retry.',
    'backoff_max_seconds': 'Longest wait before a backoff retry (each wait '
                           'is random between the two).',
    'decay_first_seconds': 'Wait before the first exponential_decay retry; '
                           'each next wait doubles.',
    'decay_max_seconds': 'Longest wait between exponential_decay retries; '
                         'retries go on at this interval until the '
                         'message\'s lifecycle ends.',
}

RETRY_OPTS = [
    (cfg.IntOpt if field.type is int else cfg.FloatOpt)(
        field.name, default=field.default,
        min=0 if field.name == 'backoff_retries' else 0.001,
        help=_RETRY_HELP[field.name])
    for field in dataclasses.fields(RetrySettings)
]

LEDGER_OPTS = [
    cfg.FloatOpt('lifecycle_seconds', default=86400.0, min=1,
                 help='Seconds from a message\'s publication after which '
                      'its pending deliveries are dropped (and counted as '
                      'expired). Retries never extend it.'),
    cfg.FloatOpt('lease_seconds', default=60.0, min=1,
                 help='Seconds a delivery process holds a delivery it '
                      'claimed. If the process dies, another one retries '
                      'the delivery after this. Must exceed twice '
                      '[filtering] delivery_timeout_seconds.'),
    cfg.IntOpt('processes', default=0, min=0,
               help='Delivery processes each server process starts; they '
                    'share the ledger and each posts up to twice '
                    '[notification] max_notifier_workers webhooks at once. '
                    '0: one per CPU core of the machine.'),
    cfg.IntOpt('niceness', default=0, min=0, max=19,
               help='How much lower than the server\'s the scheduling '
                    'priority of the delivery processes is (added to their '
                    'nice value). Raise it (e.g. to 10) so that large '
                    'fan-outs slow down the requests the server answers '
                    'meanwhile less, at the cost of slower fan-outs when '
                    'the machine is busy. 0 keeps the server\'s.'),
    cfg.FloatOpt('poll_seconds', default=1.0, min=0.01,
                 help='Longest wait of a delivery process between two '
                      'looks for due deliveries.'),
    cfg.FloatOpt('report_seconds', default=60.0, min=1,
                 help='Seconds between the log lines that count '
                      'deliveries: delivered, retried, dropped, expired.'),
]

DELIVERY_LEDGER_OPTS = RETRY_OPTS + LEDGER_OPTS

ALL_OPTS = LIMIT_OPTS + CACHE_OPTS + DELIVERY_OPTS + STORE_OPTS


def register_opts(conf):
    """Register the ``[filtering]`` options on ``conf``."""
    conf.register_opts(ALL_OPTS, group=GROUP_NAME)
    conf.register_opts(MONGODB_OPTS, group=MONGODB_GROUP_NAME)
    conf.register_opts(DELIVERY_LEDGER_OPTS, group=DELIVERY_GROUP_NAME)


def limits_from_conf(conf):
    """Return the :class:`Limits` that ``conf`` sets."""
    group = conf[GROUP_NAME]
    return Limits(**{field.name: group[field.name]
                     for field in dataclasses.fields(Limits)})


def retry_settings_from_conf(conf):
    """Return the :class:`RetrySettings` that ``conf`` sets."""
    group = conf[DELIVERY_GROUP_NAME]
    return RetrySettings(**{field.name: group[field.name]
                            for field in dataclasses.fields(RetrySettings)})


def delivery_processes(conf):
    """Return how many delivery processes ``[filtering:delivery]`` asks."""
    return conf[DELIVERY_GROUP_NAME].processes or os.cpu_count() or 1


def list_opts():
    """Return the options for oslo-config-generator."""
    return [(GROUP_NAME, ALL_OPTS), (MONGODB_GROUP_NAME, MONGODB_OPTS),
            (DELIVERY_GROUP_NAME, DELIVERY_LEDGER_OPTS)]
