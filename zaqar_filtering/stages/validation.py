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

"""The ``zaqar_filtering.validation`` subscription-pipeline stage.

It rejects a subscription whose filter options are invalid with HTTP 400
(Zaqar's ``ValidationFailed``), normalizes valid ones, and keeps the policy
store in step: every change moves its queue's version before Zaqar writes
it, logging the id of the subscription it concerns, and a background job
syncs the queue and lands the change afterwards
(:mod:`zaqar_filtering.stages.store_sync`). Server processes catch up by
reading just that subscription again (:mod:`zaqar_filtering.stages.
matcher_cache`). A new subscription's id is known only once it is written,
so when the store keeps versions the stage writes a create itself, through
Zaqar's storage controller, logs the new id, and returns it (the last
stage of the pipeline; without pooling). While the store cannot be
reached, changes are refused (503 with Retry-After, see
:mod:`zaqar_filtering.api.subscriptions`): a change other server processes
could not learn of would have them deliver by an old policy.
"""

from oslo_config import cfg
from oslo_log import log as logging
from zaqar.transport import validation

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import opts
from zaqar_filtering.stages import matcher_cache
from zaqar_filtering.stages import queue_task
from zaqar_filtering.stages import store_sync
from zaqar_filtering import store as policy_store
from zaqar_filtering.store.base import StoreUnavailable
from zaqar_filtering import validate_options

LOG = logging.getLogger(__name__)


class ValidationStage:
    """Subscription-pipeline stage; Zaqar builds it with no arguments.

    Every method returns None so that the pipeline goes on to storage.

    :param store: the policy store; by default the one zaqar.conf names.
    :param syncer: the :class:`StoreSyncer` of that store.
    :param writer: the subscription controller creates are written
        through; by default the syncer's, None with pooling (each pool's
        pipeline runs this stage again: Zaqar writes the create, and every
        process rebuilds the queue's matcher).
    """

    def __init__(self, store=None, syncer=None, writer=None, **kwargs):
        opts.register_opts(cfg.CONF)
        self._limits = opts.limits_from_conf(cfg.CONF)
        self._store = store or policy_store.shared_store(cfg.CONF)
        self._syncer = syncer or store_sync.shared_syncer(
            self._store, cfg.CONF, self._limits)
        self._writer = writer

    def create(self, queue, subscriber, ttl, options, project=None):
        self._normalize(options)
        self._check_subscriber(subscriber, options)
        writer = self._writer_for_creates()
        started = self._changing(project, queue,
                                 [] if writer is not None else None)
        if started is None or writer is None:
            return None
        created = writer.create(queue, subscriber, ttl, options,
                                project=project)
        if created is None:
            return None     # it exists: Zaqar answers 409
        refs = [{'id': str(created)}]
        try:
            started = self._store.change_started(project, queue, refs)
        except StoreUnavailable as exc:
            LOG.warning('Subscription %(id)s of queue %(queue)s is created; '
                        'other server processes learn of it once the store '
                        'is back: %(error)s', {'id': created, 'queue': queue,
                                               'error': exc})
        self._syncer.changed(project, queue, started, refs)
        return created

    def update(self, queue, subscription_id, project=None, **kwargs):
        if 'options' in kwargs:
            self._normalize(kwargs['options'])
        if 'subscriber' in kwargs:
            self._check_subscriber(kwargs['subscriber'],
                                   kwargs.get('options'))
        self._changing(project, queue, [{'id': str(subscription_id)}])

    def delete(self, queue, subscription_id, project=None):
        self._changing(project, queue, [{'id': str(subscription_id)}])
        ledger = self._store.delivery_ledger()
        if ledger is not None:
            # Its pending deliveries go with it.
            dropped = ledger.forget(project, queue, subscription_id)
            if dropped:
                LOG.info('Dropped %(count)d pending deliveries of the '
                         'deleted subscription %(id)s of queue %(queue)s',
                         {'count': dropped, 'id': subscription_id,
                          'queue': queue})

    def confirm(self, queue, subscription_id, project=None, confirmed=True):
        self._changing(project, queue, [{'id': str(subscription_id)}])

    def _changing(self, project, queue, refs):
        """Start a change of the subscriptions ``refs`` (None: unknown).

        :returns: the new ``started`` counter, or None without versions.
        """
        matcher_cache.invalidate(project, queue)
        try:
            started = self._store.change_started(project, queue, refs)
        except StoreUnavailable as exc:
            LOG.error('Refused a subscription change of queue %(queue)s '
                      '(project %(project)s): %(error)s',
                      {'queue': queue, 'project': project, 'error': exc})
            raise
        if started is not None:
            self._syncer.changed(project, queue, started, refs)
        return started

    def _writer_for_creates(self):
        if self._writer is None and not cfg.CONF.pooling:
            self._writer = self._syncer.controller()
        return self._writer

    def _check_subscriber(self, subscriber, options):
        if not queue_task.is_queue_subscriber(subscriber):
            return
        try:
            queue_task.check_subscription(subscriber, options,
                                          self._store.delivery_ledger())
        except InvalidPolicy as exc:
            raise validation.ValidationFailed('{}', str(exc))

    def _normalize(self, options):
        try:
            normalized = validate_options(options, self._limits)
        except InvalidPolicy as exc:
            # ValidationFailed formats its message: pass the text as an
            # argument so that braces in it survive.
            raise validation.ValidationFailed('{}', str(exc))
        if isinstance(options, dict):
            # The pipeline passes this dict on to storage: the one way to
            # store the normalized form.
            options.clear()
            options.update(normalized)
