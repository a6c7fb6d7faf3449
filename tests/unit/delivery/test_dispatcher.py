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

"""The dispatcher's decisions, over a MongoDB ledger on mongomock and a
task that answers as told (no HTTP)."""

import time
import unittest

import mongomock

from tests import ledger_contract
from zaqar_filtering.delivery.dispatcher import Dispatcher
from zaqar_filtering.delivery.dispatcher import UNAVAILABLE_BACKOFF_SECONDS
from zaqar_filtering.delivery.mongo_ledger import MongoLedger
from zaqar_filtering.policy import retry
from zaqar_filtering.store.base import StoreUnavailable

FAST = retry.RetrySettings(backoff_retries=2, backoff_min_seconds=0.01,
                           backoff_max_seconds=0.02,
                           decay_first_seconds=60, decay_max_seconds=60)


class InlinePoster:
    """Attempts each delivery with ``task`` as it is submitted."""

    def __init__(self, task):
        self.task = task

    def submit(self, deliveries, done):
        for d in deliveries:
            try:
                error = self.task.attempt(d.subscriber, d.body, d.headers,
                                          project=d.project)
            except Exception as exc:
                error = exc
            done(d, error)

    def shutdown(self):
        pass


class ScriptedTask:
    """Answers each attempt with the next of ``answers`` (None: 2xx)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.attempts = []

    def attempt(self, subscriber, data, headers, project=None):
        self.attempts.append((subscriber, data, headers))
        return self.answers.pop(0) if self.answers else None


class UnavailableLedger:
    def claim(self, now, limit, lease_seconds):
        raise StoreUnavailable('delivery ledger (test)', 'refused')

    def record(self, outcomes):
        raise StoreUnavailable('delivery ledger (test)', 'refused')


class TestDispatcher(unittest.TestCase):

    def setUp(self):
        self.ledger = MongoLedger(mongomock.MongoClient(tz_aware=True).db)

    def dispatcher(self, task, settings=FAST, ledger=None):
        return Dispatcher(ledger or self.ledger, InlinePoster(task),
                          settings, workers=4, lease_seconds=30,
                          poll_seconds=0.5, report_seconds=60)

    def test_outcomes_are_recorded_by_the_next_step(self):
        self.enqueue(bodies=('a', 'b'))
        dispatcher = self.dispatcher(ScriptedTask())
        dispatcher.step()
        self.assertEqual((2, 0), (self.stats().pending,
                                  self.stats().delivered))
        dispatcher.step()
        self.assertEqual((0, 2), (self.stats().pending,
                                  self.stats().delivered))

    def test_outcomes_wait_while_the_ledger_is_unreachable(self):
        self.enqueue()
        dispatcher = self.dispatcher(ScriptedTask())
        dispatcher.step()
        record, self.ledger.record = self.ledger.record, UnavailableLedger(
        ).record
        with self.assertLogs('zaqar_filtering.delivery.dispatcher',
                             'ERROR'):
            self.assertEqual(UNAVAILABLE_BACKOFF_SECONDS, dispatcher.step())
        self.ledger.record = record
        dispatcher.step()
        self.assertEqual(1, self.stats().delivered)

    def enqueue(self, **kwargs):
        kwargs.setdefault('published', time.time())
        self.ledger.enqueue(ledger_contract.new(**kwargs))

    def stats(self):
        [stats] = self.ledger.stats()
        return stats

    def steps(self, dispatcher):
        """Post what is due, then record how it went."""
        dispatcher.step()
        return dispatcher.step()

    def until_idle(self, dispatcher, most=20):
        for _ in range(most):
            wait = dispatcher.step()
            if self.ledger.next_due() is None:
                return
            time.sleep(min(wait, 0.05))
        self.fail('deliveries still pending after %d steps' % most)

    def test_a_2xx_answer_is_delivered(self):
        self.enqueue(bodies=('hello',))
        task = ScriptedTask()
        self.steps(self.dispatcher(task))
        self.assertEqual([('http://127.0.0.1:1/s1', 'hello',
                           {'Content-Type': 'application/json'})],
                         task.attempts)
        stats = self.stats()
        self.assertEqual((0, 1, None), (stats.pending, stats.delivered,
                                        stats.last_error))

    def test_a_failure_is_retried_after_the_strategys_delay(self):
        self.enqueue()
        task = ScriptedTask('HTTP 500')
        dispatcher = self.dispatcher(task)
        before = time.time()
        self.steps(dispatcher)
        stats = self.stats()
        self.assertEqual((1, 1, 'HTTP 500'), (stats.pending, stats.retrying,
                                              stats.last_error))
        self.assertGreaterEqual(self.ledger.next_due(), before + 60)
        # Not due yet: no second attempt, and the dispatcher waits.
        self.assertEqual(0.5, dispatcher.step())
        self.assertEqual(1, len(task.attempts))

    def test_backoff_drops_after_its_retries(self):
        self.enqueue(strategy=retry.BACKOFF, bodies=('a', 'b'))
        task = ScriptedTask('HTTP 503', 'HTTP 503', 'timed out')
        self.until_idle(self.dispatcher(task))
        self.assertEqual(['a', 'a', 'a', 'b'],
                         [body for _, body, _ in task.attempts])
        stats = self.stats()
        self.assertEqual((0, 0, 1, 1, 'timed out'),
                         (stats.pending, stats.retrying, stats.delivered,
                          stats.dropped, stats.last_error))

    def test_zaqar_schedule_comes_from_the_delivery(self):
        self.enqueue(strategy=retry.ZAQAR, policy={
            'retries_with_no_delay': 1, 'minimum_delay_retries': 0,
            'maximum_delay_retries': 0, 'minimum_delay': 5,
            'maximum_delay': 5})
        task = ScriptedTask('HTTP 500', 'HTTP 502')
        self.until_idle(self.dispatcher(task))
        self.assertEqual(2, len(task.attempts))
        self.assertEqual((1, 'HTTP 502'), (self.stats().dropped,
                                           self.stats().last_error))

    def test_a_retry_past_the_lifecycle_expires_now(self):
        self.enqueue(lifecycle=30)
        task = ScriptedTask('HTTP 500')
        self.steps(self.dispatcher(task))
        stats = self.stats()
        self.assertEqual((0, 1, 'HTTP 500'), (stats.pending, stats.expired,
                                              stats.last_error))

    def test_an_ended_lifecycle_is_not_attempted(self):
        self.enqueue(published=time.time() - 100, lifecycle=10)
        task = ScriptedTask()
        self.steps(self.dispatcher(task))
        self.assertEqual([], task.attempts)
        self.assertEqual((1, 'the lifecycle ended before an attempt'),
                         (self.stats().expired, self.stats().last_error))

    def test_an_unavailable_ledger_backs_off(self):
        dispatcher = self.dispatcher(ScriptedTask(),
                                     ledger=UnavailableLedger())
        with self.assertLogs('zaqar_filtering.delivery.dispatcher',
                             'ERROR') as logs:
            self.assertEqual(UNAVAILABLE_BACKOFF_SECONDS, dispatcher.step())
        self.assertIn('delivery ledger (test) is unavailable: refused',
                      logs.output[0])

    def test_run_logs_the_counts(self):
        self.enqueue(bodies=('a', 'b'))
        self.enqueue(sub='s2', bodies=('c',))
        steps = iter([False, True])
        with self.assertLogs('zaqar_filtering.delivery.dispatcher',
                             'INFO') as logs:
            self.dispatcher(ScriptedTask(None, 'HTTP 500')).run(
                lambda: next(steps))
        self.assertIn('2 delivered, 1 failed and to be tried again, '
                      '0 dropped after their last retry, 0 dropped at the '
                      'end of their lifecycle', logs.output[-1])
