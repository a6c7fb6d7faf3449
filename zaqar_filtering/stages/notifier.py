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

"""The ``zaqar_filtering.notifier`` message-pipeline stage.

It replaces Zaqar's stock notifier (``zaqar.notification.notifier``): for
every post it asks the queue's cached :class:`Matcher` which subscriptions
receive which messages, and hands each subscription only its messages
over for delivery: webhooks through the durable delivery ledger to
separate delivery processes (:mod:`zaqar_filtering.delivery`), mailto and
trust+ to Zaqar's own tasks (see :mod:`zaqar_filtering.stages.sender`). A
subscription without filter policies gets every message, as with the stock
notifier. What depends only on the set of subscriptions a post reaches
(their grouping by sender, their ledger targets and the targets'
encoding) is prepared once and kept with the queue's matcher until a
subscription of the queue changes, so a post costs about the same for 10
or 5,000 matching subscriptions. Delivered notifications carry the
messages' filter fields. Filter fields that a client could only send
inside the body (under ``_filtering``) are validated here, for the whole
batch: one invalid message makes Zaqar answer 400 and store nothing.
"""

from concurrent import futures
import functools
import itertools
import json
import logging as std_logging
import threading
import time

from oslo_config import cfg
from oslo_log import log as logging
import stevedore
from zaqar.storage import pooling
from zaqar.transport import validation

from zaqar_filtering.delivery import process
from zaqar_filtering import InvalidPolicy
from zaqar_filtering import opts
from zaqar_filtering.policy.message import with_body_fields
from zaqar_filtering.policy.ordering import is_ordered
from zaqar_filtering.stages.matcher_cache import MatcherCache
from zaqar_filtering.stages import queue_task
from zaqar_filtering.stages import sender
from zaqar_filtering import store as policy_store

LOG = logging.getLogger(__name__)

TASKS_NAMESPACE = 'zaqar.notification.tasks'
NOTIFICATION = 'Notification'


class NotifierStage:
    """Message-pipeline stage that delivers only matching messages.

    Zaqar builds it with keyword arguments (storage/pipeline.py). Only
    ``post`` is public: the pipeline calls any method named like a storage
    controller method, and a non-None result would replace the storage.

    :param subscription_controller: Zaqar's subscription controller.
    :param queue_controller: Zaqar's queue controller (retry policies).
    :param max_notifier_workers: delivery threads, for webhooks (in the
        delivery process) and for the other schemes (in this process).
    :param require_confirmation: skip subscriptions not yet confirmed.
    :param senders: senders by URI scheme (see
        :mod:`zaqar_filtering.stages.sender`); by default webhooks go to a
        delivery process and other schemes to Zaqar's own tasks.
    """

    def __init__(self, subscription_controller=None, queue_controller=None,
                 max_notifier_workers=10, require_confirmation=False,
                 senders=None, store=None, **kwargs):
        self._subscriptions = subscription_controller
        self._queues = queue_controller
        self._require_confirmation = require_confirmation
        # With pooling, the stage of each pool's pipeline delivers; the
        # outer one sees the pooled controller and must not deliver twice.
        self._pooled = isinstance(subscription_controller,
                                  pooling.SubscriptionController)
        driver = getattr(subscription_controller, 'driver', None)
        self._conf = getattr(driver, 'conf', None) or cfg.CONF
        opts.register_opts(self._conf)
        group = self._conf[opts.GROUP_NAME]
        self._limits = opts.limits_from_conf(self._conf)
        store = store or policy_store.shared_store(self._conf)
        self._cache = MatcherCache(subscription_controller, self._limits,
                                   group.matcher_cache_seconds, store)
        if senders is None:
            senders = _default_senders(self._conf, max_notifier_workers,
                                       group.delivery_timeout_seconds, store,
                                       start=not self._pooled)
        self._senders = senders

    def post(self, queue_name, messages, client_uuid, project=None):
        """Deliver each message to the subscriptions it matches."""
        if self._pooled or self._subscriptions is None:
            return None
        messages = self._with_body_fields(messages)
        started = time.monotonic()
        queue = self._cache.get(project, queue_name)
        # Consecutive messages that reach the same subscriptions go
        # together: usually all of a post's.
        routes = []
        for message in messages:
            matched = queue.match(message)
            if not matched:
                continue
            notification = dict(message, Message_Type=NOTIFICATION)
            if routes and routes[-1][0] == matched:
                routes[-1][1].append(notification)
            else:
                routes.append((matched, [notification]))
        if LOG.isEnabledFor(std_logging.DEBUG):
            reached = set().union(*(matched for matched, _ in routes))
            LOG.debug('Queue %(queue)s (project %(project)s): %(messages)d '
                      'messages matched %(subs)d of %(total)d subscriptions '
                      'in %(ms).2f ms: %(matched)s',
                      {'queue': queue_name, 'project': project,
                       'messages': len(messages), 'subs': len(reached),
                       'total': len(queue),
                       'ms': (time.monotonic() - started) * 1000,
                       'matched': _some(reached)})
        if not routes:
            return None
        metadata = self._queues.get(queue_name, project)
        retry_policy = metadata.get('_retry_policy', {})
        ordered = is_ordered(metadata)
        policy_key = json.dumps(retry_policy, sort_keys=True)
        for matched, notifications in routes:
            # What depends only on the subscriptions reached is prepared
            # once: a post's own work does not grow with its fan-out.
            matched = frozenset(matched)
            plan = queue.plan((matched, policy_key), functools.partial(
                self._plan, queue, matched, retry_policy))
            for deliveries, prepared in plan:
                deliveries.deliver(prepared, notifications, project=project,
                                   ordered=ordered)
        return None

    def _plan(self, queue, matched, retry_policy):
        """Return (sender, prepared deliveries) for each sender needed."""
        by_sender = {}
        for sub_id in matched:
            subscription = queue.subscriptions.get(sub_id)
            if subscription is None:
                continue    # removed since the post matched
            scheme = queue.schemes[sub_id]
            if self._sendable(subscription, scheme):
                by_sender.setdefault(self._senders[scheme], []).append(
                    subscription)
        return [(deliveries, deliveries.prepare(subscriptions, retry_policy))
                for deliveries, subscriptions in by_sender.items()]

    def _with_body_fields(self, messages):
        # Validates the whole batch before anything is stored or sent.
        found = []
        for index, message in enumerate(messages):
            try:
                found.append(with_body_fields(message, self._limits))
            except InvalidPolicy as exc:
                # ValidationFailed formats its text: pass it as an argument.
                raise validation.ValidationFailed(
                    '{}', 'messages[%d]: %s' % (index, exc))
        return found

    def _sendable(self, subscription, scheme):
        if self._require_confirmation and not subscription.get('confirmed',
                                                               True):
            LOG.info('The subscriber %s is not confirmed.',
                     subscription['subscriber'])
            return False
        if scheme not in self._senders:
            LOG.error('No delivery task for subscriber %(subscriber)s: '
                      'scheme %(scheme)r is not one of %(known)s',
                      {'subscriber': subscription['subscriber'],
                       'scheme': scheme, 'known': sorted(self._senders)})
            return False
        return True


def _some(ids, most=20):
    """Return up to ``most`` of ``ids`` as text, for a log line."""
    shown = sorted(map(str, itertools.islice(ids, most)))
    more = len(ids) - len(shown)
    return ', '.join(shown) + (' and %d more' % more if more else '')


def _default_senders(conf, workers, timeout, store, start):
    """Webhooks to a delivery process, other schemes to Zaqar's tasks.

    :param start: start the delivery process now, so that it resumes the
        retries pending in the delivery ledger.
    """
    executor = futures.ThreadPoolExecutor(max_workers=workers)
    senders = {name: sender.ThreadSender(task, executor, conf)
               for name, task in _load_tasks().items()}
    webhooks = _webhook_sender(conf, workers, timeout, store)
    if start and isinstance(webhooks, sender.LedgerSender):
        webhooks.start()
    senders.update(http=webhooks, https=webhooks)
    senders.pop(queue_task.SCHEME, None)
    if isinstance(webhooks, sender.LedgerSender):
        senders[queue_task.SCHEME] = webhooks
    return senders


_WEBHOOK_SENDERS = {}
_WEBHOOK_SENDERS_LOCK = threading.Lock()


def _webhook_sender(conf, workers, timeout, store):
    """Return this process's webhook sender for ``conf``.

    Through the delivery ledger when the store keeps one; one per process,
    so that the stages of several pools share a delivery process.
    """
    with _WEBHOOK_SENDERS_LOCK:
        found = _WEBHOOK_SENDERS.get(id(conf))
        if found is not None:
            return found
        ledger = store.delivery_ledger()
        if ledger is None:
            LOG.warning('The %s policy store keeps no delivery ledger here: '
                        'webhook retries are sleeps in the delivery process, '
                        'lost if it stops, and follow Zaqar\'s retry policy '
                        'only.', store.name)
            found = sender.ProcessSender(workers, timeout)
        else:
            process.check_lease(conf)
            found = sender.LedgerSender(
                ledger, sender.DeliveryProcess(
                    process.serve, (process.config_args(conf), workers),
                    opts.delivery_processes(conf)),
                conf[opts.DELIVERY_GROUP_NAME].lifecycle_seconds)
        _WEBHOOK_SENDERS[id(conf)] = found
        return found


def use_webhook_sender(conf, found):
    """Make ``found`` this process's webhook sender for ``conf``.

    The delivery process sets its own (see
    :mod:`zaqar_filtering.delivery.process`).
    """
    with _WEBHOOK_SENDERS_LOCK:
        _WEBHOOK_SENDERS[id(conf)] = found


def _load_tasks():
    """Load Zaqar's delivery tasks once, by URI scheme."""
    manager = stevedore.ExtensionManager(
        TASKS_NAMESPACE, invoke_on_load=True,
        on_load_failure_callback=_task_failed)
    if not manager.names():
        raise RuntimeError('No delivery task found in the entry point '
                           'namespace %s: is Zaqar installed?'
                           % TASKS_NAMESPACE)
    return {extension.name: extension.obj for extension in manager}


def _task_failed(manager, entry_point, exc):
    raise RuntimeError('Cannot load the delivery task %s of %s: %s'
                       % (entry_point.name, TASKS_NAMESPACE, exc)) from exc
