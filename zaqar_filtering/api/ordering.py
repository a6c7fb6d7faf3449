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

"""The ``_ordered_by_key`` queue flag in Zaqar's queue requests.

Zaqar checks the reserved metadata of a queue (names starting with ``_``)
in ``Validator.queue_metadata_putting``, which both ``PUT`` and ``PATCH
/v2/queues/{queue_name}`` call; a ``ValidationFailed`` there is an HTTP 400
and the queue is neither created nor changed.
"""

from zaqar.conf import drivers as drivers_conf
from zaqar.conf import storage as storage_conf
from zaqar.transport import validation

from zaqar_filtering import InvalidPolicy
from zaqar_filtering.policy import ordering
from zaqar_filtering.stages.ordering import STAGE_NAME

#: The message stores whose claims can be ordered.
ORDERED_STORES = ('redis', 'mongodb')
NOTIFIER = 'zaqar_filtering.notifier'


def deployment_problem(conf):
    """Why this deployment cannot order claims, or None if it can."""
    conf.register_opts(storage_conf.ALL_OPTS, group=storage_conf.GROUP_NAME)
    conf.register_opts(drivers_conf.ALL_OPTS, group=drivers_conf.GROUP_NAME)
    stages = conf[storage_conf.GROUP_NAME]
    message_stages = list(stages.message_pipeline)
    if STAGE_NAME not in message_stages or STAGE_NAME not in list(
            stages.claim_pipeline):
        return ('this server does not order claims: [storage] '
                'message_pipeline and claim_pipeline must both list %s'
                % STAGE_NAME)
    if (NOTIFIER in message_stages and message_stages.index(NOTIFIER) >
            message_stages.index(STAGE_NAME)):
        return ('[storage] message_pipeline must list %s after %s'
                % (STAGE_NAME, NOTIFIER))
    if conf.pooling:
        return 'pooled deployments do not order claims'
    store = conf[drivers_conf.GROUP_NAME].message_store
    if store not in ORDERED_STORES:
        return ('the %s message store does not order claims; %s do'
                % (store, ' and '.join(ORDERED_STORES)))
    return None


class QueueMetadataValidation:
    """Validator mixin: checks ``_ordered_by_key`` in queue metadata."""

    def queue_metadata_putting(self, queue_metadata):
        super().queue_metadata_putting(queue_metadata)
        try:
            ordering.check_queue_metadata(queue_metadata)
        except InvalidPolicy as exc:
            # ValidationFailed formats its text: pass it as an argument.
            raise validation.ValidationFailed('{}', str(exc))
        if ordering.is_ordered(queue_metadata):
            problem = deployment_problem(self._conf)
            if problem:
                raise validation.ValidationFailed(
                    '{}', '%s: %s' % (ordering.ORDERED_BY_KEY, problem))
