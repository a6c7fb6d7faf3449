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

"""Finish a subscription change in the policy store once Zaqar wrote it.

The subscription stage runs before Zaqar writes a change, so it only says
that a change started (and which subscriptions it concerns), and a
background thread, a moment later, copies the queue's subscriptions to the
store (for stores that keep records) and says the change landed. Changes
to one queue close together are handled by one job. A second, later job
moves the version once more, logging the same subscriptions again, for
writes that took longer than the first.
"""

import datetime
import heapq
import threading
import time

from oslo_log import log as logging

from zaqar_filtering.store.base import StoreUnavailable
from zaqar_filtering.store.sync import sync_queue
from zaqar_filtering import zaqar_storage

LOG = logging.getLogger(__name__)

_SHARED = {}
_SHARED_LOCK = threading.Lock()

#: Seconds after a change before its queue is synced and landed, then
#: moved once more.
DELAYS = (0.25, 2.0)
#: Seconds between attempts while the store is unavailable, and how many.
RETRY_SECONDS = 5.0
ATTEMPTS = 12


def shared_syncer(store, conf, limits):
    """Return this process's syncer of ``store``, made on first use."""
    with _SHARED_LOCK:
        syncer = _SHARED.get(id(store))
        if syncer is None:
            syncer = _SHARED[id(store)] = StoreSyncer(store, conf, limits)
        return syncer


class StoreSyncer:
    """A daemon thread that lands changes and syncs queues to the store.

    :param store: a :class:`~zaqar_filtering.store.base.PolicyStore`.
    :param conf: zaqar.conf's ``ConfigOpts`` (for Zaqar's storage driver).
    :param limits: the :class:`Limits` policies are checked against.
    :param controller: Zaqar's subscription controller without pipeline;
        built from ``conf`` on first use when not given.
    :param delays: seconds after a change for each job.
    :param retry_seconds: seconds between attempts while the store is
        unavailable.
    """

    def __init__(self, store, conf, limits, controller=None, delays=DELAYS,
                 retry_seconds=RETRY_SECONDS, clock=time.monotonic):
        self._store = store
        self._conf = conf
        self._limits = limits
        self._controller = controller
        self._delays = delays
        self._retry_seconds = retry_seconds
        self._clock = clock
        self._jobs = []             # heap of (due, sequence, key)
        self._pending = {}   # (project, queue, step) -> (started, refs)
        self._sequence = 0
        self._wakeup = threading.Condition()
        self._thread = None

    def changed(self, project, queue, started, refs=None):
        """Schedule the jobs of a change whose ``started`` counter is given.

        :param refs: the subscriptions it concerns (see
            :meth:`PolicyStore.change_started`), logged again by the later
            job.
        """
        now = self._clock()
        with self._wakeup:
            for step, delay in enumerate(self._delays):
                key = (project, queue, step)
                if key in self._pending:
                    self._pending[key] = _merged(self._pending[key],
                                                 (started, refs))
                    continue
                self._pending[key] = (started, refs)
                self._sequence += 1
                heapq.heappush(self._jobs, (now + delay, self._sequence,
                                            key, 1))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name='zaqar-filtering-store-sync',
                    daemon=True)
                self._thread.start()
            self._wakeup.notify()

    def _run(self):
        while True:
            with self._wakeup:
                while not self._jobs or self._jobs[0][0] > self._clock():
                    timeout = (self._jobs[0][0] - self._clock()
                               if self._jobs else None)
                    self._wakeup.wait(timeout)
                due, _, key, attempt = heapq.heappop(self._jobs)
                change = self._pending.pop(key)
            try:
                self._land(key, *change)
            except StoreUnavailable as exc:
                self._retry(key, change, attempt, exc)
            except Exception:
                LOG.exception('Could not finish the subscription change of '
                              'queue %(queue)s (project %(project)s); run '
                              '"zaqar-filtering-manage sync --project '
                              '%(project)s --queue %(queue)s"',
                              {'project': key[0], 'queue': key[1]})

    def _land(self, key, started, refs):
        project, queue, step = key
        if step > 0:
            # Once more, for writes slower than the first job's delay.
            started = self._store.change_started(project, queue, refs)
        elif self._store.keeps_records:
            result = sync_queue(
                self._store, project, queue,
                zaqar_storage.list_subscriptions(self._subscriptions(),
                                                 project, queue),
                self._limits,
                datetime.datetime.now(datetime.timezone.utc))
            LOG.debug('Synced queue %(queue)s (project %(project)s) to the '
                      'policy store: %(result)s',
                      {'queue': queue, 'project': project, 'result': result})
        self._store.changes_landed(project, queue, started)

    def _retry(self, key, change, attempt, exc):
        project, queue, _ = key
        if attempt >= ATTEMPTS:
            LOG.error('Gave up finishing the subscription change of queue '
                      '%(queue)s (project %(project)s) after %(n)d attempts: '
                      '%(error)s. Other server processes read its '
                      'subscriptions again for every post until it lands; '
                      'run '
                      '"zaqar-filtering-manage sync --project %(project)s '
                      '--queue %(queue)s" once the store is back.',
                      {'queue': queue, 'project': project, 'n': attempt,
                       'error': exc})
            return
        LOG.warning('Could not finish the subscription change of queue '
                    '%(queue)s (project %(project)s), attempt %(n)d of '
                    '%(of)d: %(error)s',
                    {'queue': queue, 'project': project, 'n': attempt,
                     'of': ATTEMPTS, 'error': exc})
        with self._wakeup:
            if key in self._pending:
                self._pending[key] = _merged(self._pending[key], change)
                return
            self._pending[key] = change
            self._sequence += 1
            heapq.heappush(self._jobs, (self._clock() + self._retry_seconds,
                                        self._sequence, key, attempt + 1))
            self._wakeup.notify()

    def controller(self):
        """Return Zaqar's subscription controller (without pipeline)."""
        return self._subscriptions()

    def _subscriptions(self):
        if self._controller is None:
            self._controller = zaqar_storage.data_driver(
                self._conf).subscription_controller
        return self._controller


def _merged(pending, change):
    """Return one ``(started, refs)`` for two changes of a queue."""
    (started, refs), (other, more) = pending, change
    if refs is None or more is None:
        return max(started, other), None
    ids = {ref['id']: ref for ref in refs + more}
    return max(started, other), [ids[i] for i in sorted(ids)]
