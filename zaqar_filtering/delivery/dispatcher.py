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

"""Posts the due deliveries of a ledger, and records how each went.

A :class:`Dispatcher` holds at most twice as many claimed deliveries as
it has workers, and claims again once no more than ``workers`` are out,
so claims come in batches. Its poster attempts them all at once: each
post ends within twice the delivery timeout (a connection, then an
answer), which the lease covers. The outcomes are recorded by the loop,
many in one round trip, before it claims again.
"""

import collections
import json
import random
import threading
import time

from oslo_log import log as logging

from zaqar_filtering.delivery import ledger as base
from zaqar_filtering.policy import retry
from zaqar_filtering.store.base import StoreUnavailable

LOG = logging.getLogger(__name__)

RETRIED = base.RETRIED
#: The error of a delivery whose lifecycle ended before it was attempted.
NO_ATTEMPT = 'the lifecycle ended before an attempt'

#: Seconds to wait before looking again after the ledger was unreachable.
UNAVAILABLE_BACKOFF_SECONDS = 5.0


class Dispatcher:
    """Claims due deliveries, has its poster attempt them, records outcomes.

    :param ledger: a :class:`~zaqar_filtering.delivery.ledger.Ledger`.
    :param poster: makes the attempts: ``submit(deliveries, done)`` calls
        ``done(delivery, error)`` for each, from any thread, with None on
        success, the error as text, or the exception of an attempt that
        failed unexpectedly; ``shutdown()`` (see :class:`~zaqar_
        filtering.delivery.poster.LoopPoster`).
    :param settings: the :class:`~zaqar_filtering.policy.retry.
        RetrySettings`.
    :param workers: ``[notification] max_notifier_workers``; the
        dispatcher holds at most twice as many deliveries.
    :param lease_seconds: how long a claimed delivery stays leased.
    :param poll_seconds: longest wait between two looks at the ledger.
    :param report_seconds: seconds between two log lines of counts.
    """

    def __init__(self, ledger, poster, settings, workers, lease_seconds,
                 poll_seconds, report_seconds):
        self._ledger = ledger
        self._poster = poster
        self._settings = settings
        self._workers = workers
        self._lease = lease_seconds
        self._poll = poll_seconds
        self._report_every = report_seconds
        self._lock = threading.Lock()
        self._busy = 0
        self._outcomes = []
        self._wake = threading.Event()
        self._random = random.SystemRandom()
        self._schedules = {}
        self._counts = collections.Counter()
        self._reported = time.monotonic()

    def wake(self):
        """Look at the ledger now (new deliveries were enqueued)."""
        self._wake.set()

    def run(self, stopped):
        """Dispatch until ``stopped()`` is true, then finish what is out."""
        try:
            while not stopped():
                wait = self.step()
                self._wake.wait(wait)
                self._wake.clear()
                self._maybe_report()
        finally:
            self._poster.shutdown()
            try:
                self._flush()
            except StoreUnavailable as exc:
                LOG.error('Cannot record the last outcomes; those '
                          'deliveries are tried again when their leases '
                          'end: %s', exc)
            self._report()

    def step(self):
        """Record the outcomes left, then claim if few deliveries are out.

        :returns: seconds to wait before the next step.
        """
        try:
            self._flush()
        except StoreUnavailable as exc:
            LOG.error('Cannot record webhook delivery outcomes: %s', exc)
            return max(self._poll, UNAVAILABLE_BACKOFF_SECONDS)
        with self._lock:
            room = 2 * self._workers - self._busy
        if room < self._workers:
            return self._poll
        try:
            claimed = self._ledger.claim(time.time(), room, self._lease)
            next_due = None if claimed else self._ledger.next_due()
        except StoreUnavailable as exc:
            LOG.error('Cannot claim webhook deliveries: %s', exc)
            return max(self._poll, UNAVAILABLE_BACKOFF_SECONDS)
        now = time.time()
        due = [d for d in claimed if now < d.deadline]
        with self._lock:
            self._busy += len(due)
            self._outcomes.extend(
                base.Outcome(d, base.EXPIRED, NO_ATTEMPT, now=now)
                for d in claimed if now >= d.deadline)
        if due:
            self._poster.submit(due, self._attempted)
        if claimed or next_due is None:
            return self._poll
        return min(self._poll, max(0.0, next_due - time.time()))

    def _attempted(self, delivery, error):
        if isinstance(error, Exception):
            LOG.error('Delivery %s to %s failed unexpectedly; it is tried '
                      'again when its lease ends', delivery.id,
                      delivery.subscriber, exc_info=error)
            outcome = None
        else:
            outcome = self._outcome(delivery, error)
        with self._lock:
            if outcome is not None:
                self._outcomes.append(outcome)
            self._busy -= 1
            # Claim again once the poster may run out of work.
            wake = self._busy <= self._workers
        if wake and not self._wake.is_set():
            self._wake.set()

    def _outcome(self, delivery, error):
        """Return the :class:`Outcome` of an attempt that ended so."""
        now = time.time()
        if error is None:
            return base.Outcome(delivery, base.DELIVERED, now=now)
        delay = self._schedule(delivery).delay(delivery.attempts + 1,
                                               self._random)
        if delay is None:
            return base.Outcome(delivery, base.DROPPED, error, now=now)
        if now + delay >= delivery.deadline:
            return base.Outcome(delivery, base.EXPIRED, error, now=now)
        return base.Outcome(delivery, RETRIED, error, now + delay, now)

    def _flush(self):
        """Record the outcomes left since the last call, in one call."""
        with self._lock:
            outcomes, self._outcomes = self._outcomes, []
        if not outcomes:
            return
        try:
            kept = self._ledger.record(outcomes)
        except StoreUnavailable:
            with self._lock:
                self._outcomes[:0] = outcomes
            raise
        for outcome, recorded in zip(outcomes, kept):
            self._log(outcome, recorded)

    def _log(self, outcome, recorded):
        delivery, event = outcome.delivery, outcome.event
        if not recorded:
            LOG.warning('Could not record delivery %(id)s to %(subscriber)s '
                        '(%(event)s): its subscription was deleted, or its '
                        'lease ended and another process has it (raise '
                        '[filtering:delivery] lease_seconds if this '
                        'repeats).', {'id': delivery.id, 'event': event,
                                      'subscriber': delivery.subscriber})
            return
        with self._lock:
            self._counts[event] += 1
        if event == base.DELIVERED:
            return
        LOG.log(logging.INFO if event == RETRIED else logging.WARNING,
                'Delivery %(id)s of queue %(queue)s to %(subscriber)s '
                '(subscription %(sub)s), %(attempts)d failed attempt(s), '
                'last error %(error)s: %(event)s',
                {'id': delivery.id, 'queue': delivery.queue,
                 'subscriber': delivery.subscriber,
                 'sub': delivery.subscription_id,
                 'attempts': delivery.attempts + (outcome.error
                                                  != NO_ATTEMPT),
                 'error': outcome.error, 'event': _EVENTS[event] % {
                     'delay': (outcome.due or outcome.now) - outcome.now}})

    def _schedule(self, delivery):
        # Only Zaqar's schedule depends on more than the strategy.
        key = delivery.strategy
        if key == retry.ZAQAR:
            key = json.dumps(delivery.policy, sort_keys=True)
        schedule = self._schedules.get(key)
        if schedule is None:
            schedule = self._schedules[key] = retry.schedule_for(
                delivery.strategy, self._settings, delivery.policy)
        return schedule

    def _maybe_report(self):
        if time.monotonic() - self._reported >= self._report_every:
            self._report()

    def _report(self):
        with self._lock:
            counts, self._counts = self._counts, collections.Counter()
        seconds = time.monotonic() - self._reported
        self._reported = time.monotonic()
        if not counts:
            return
        LOG.info('Webhook deliveries in the last %(seconds).0f s: '
                 '%(delivered)d delivered, %(retried)d failed and to be '
                 'tried again, %(dropped)d dropped after their last retry, '
                 '%(expired)d dropped at the end of their lifecycle',
                 dict({event: counts[event] for event in _EVENTS},
                      seconds=seconds))


_EVENTS = {
    base.DELIVERED: 'delivered',
    RETRIED: 'tried again in %(delay).1f s',
    base.DROPPED: 'dropped after its last retry',
    base.EXPIRED: 'dropped, its lifecycle ended',
}
