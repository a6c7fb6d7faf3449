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

"""The MongoDB delivery ledger, over mongomock and over a real MongoDB.

The real-server classes run when ZAQAR_FILTERING_TEST_MONGODB_URL is set
and skip, saying so, otherwise.
"""

import os
import socket
import threading
import time
import unittest
import uuid

import mongomock
import pymongo

from tests import ledger_contract
from tests.ledger_contract import LEASE
from tests.ledger_contract import new
from tests.ledger_contract import NOW
from tests.unit.store import fixtures
from zaqar_filtering.delivery import ledger as base
from zaqar_filtering.delivery.mongo_ledger import MongoLedger
from zaqar_filtering.policy import retry
from zaqar_filtering.store.base import StoreUnavailable


def mongomock_database():
    """Return a fresh in-memory mongomock database."""
    return mongomock.MongoClient(tz_aware=True)['test']


def real_database(testcase):
    """Return a fresh database of the real test server, or skip."""
    uri = os.environ.get(fixtures.MONGODB_URL_VARIABLE)
    if not uri:
        testcase.skipTest('%s is not set: skipped the ledger suite against '
                          'a real MongoDB (it ran against mongomock)'
                          % fixtures.MONGODB_URL_VARIABLE)
    name = 'zaqar_filtering_test_%s' % uuid.uuid4().hex[:12]
    client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=5000)
    testcase.addCleanup(client.close)
    testcase.addCleanup(client.drop_database, name)
    return client[name]


class SharedDatabase:
    """Two ledgers (two server processes) over one database."""

    def make_database(self):
        raise NotImplementedError

    def make_ledger(self):
        self.database = self.make_database()
        return MongoLedger(self.database)

    def test_two_ledgers_never_claim_the_same_delivery(self):
        other = MongoLedger(self.database)
        for sub in ('s1', 's2', 's3'):
            self.ledger.enqueue(new(sub, strategy=retry.ZAQAR,
                                    bodies=['%s-%d' % (sub, i)
                                            for i in range(10)]))
        seen = []
        ledgers = [self.ledger, other]
        turn = 0
        while True:
            first = ledgers[turn % 2].claim(NOW, 4, LEASE)
            second = ledgers[(turn + 1) % 2].claim(NOW, 3, LEASE)
            if not first and not second:
                break
            seen.extend(d.id for d in first + second)
            turn += 1
        self.assertEqual(30, len(seen))
        self.assertEqual(len(seen), len(set(seen)))

    def test_a_delivery_claimed_since_it_was_read_is_skipped(self):
        other = MongoLedger(self.database)
        self.ledger.enqueue(new(strategy=retry.ZAQAR, bodies=('a', 'b')))
        read = self.ledger._due_candidates
        taken = []

        def read_then_lose_the_race(now, count):
            candidates = read(now, count)
            taken.extend(other.claim(now, 1, LEASE))
            return candidates

        self.ledger._due_candidates = read_then_lose_the_race
        claimed = self.ledger.claim(NOW, 10, LEASE)
        self.assertEqual(['a'], [d.body for d in taken])
        self.assertEqual(['b'], [d.body for d in claimed])
        # Only the winner's lease counts.
        self.assertTrue(other.finish(taken[0], base.DELIVERED, None, NOW))

    def test_a_lease_taken_over_is_recorded_by_its_new_holder_only(self):
        other = MongoLedger(self.database)
        self.ledger.enqueue(new(bodies=('a',)))
        [first] = self.ledger.claim(NOW, 1, LEASE)
        [again] = other.claim(NOW + LEASE + 1, 1, LEASE)
        self.assertEqual(first.id, again.id)
        self.assertFalse(self.ledger.retry(first, NOW + 99, 'HTTP 500',
                                           NOW + LEASE + 2))
        self.assertTrue(other.retry(again, NOW + 99, 'HTTP 500',
                                    NOW + LEASE + 2))
        [stats] = self.ledger.stats()
        self.assertEqual((1, 1), (stats.pending, stats.retrying))

    def test_times_are_kept_as_floats(self):
        self.ledger.enqueue(new(bodies=('a',), published=NOW + 0.25))
        self.assertEqual(NOW + 0.25, self.ledger.next_due())
        [delivery] = self.ledger.claim(NOW + 1, 1, LEASE)
        self.assertEqual((NOW + 0.25, NOW + 0.25 + 86400.0),
                         (delivery.published, delivery.deadline))
        self.assertEqual(NOW + 1 + LEASE, self.ledger.next_due())

    def test_a_backoff_delivery_parked_behind_nothing_is_unparked(self):
        # As if the subscriber's head was finished by another process
        # between enqueue's look at it and the insert.
        self.ledger.enqueue(new(strategy=retry.BACKOFF, bodies=('a',)))
        self.database['zaqar_filtering_deliveries'].update_many(
            {}, {'$set': {'parked': True}})
        self.ledger.enqueue(new(strategy=retry.BACKOFF, bodies=('b',)))
        [a] = self.ledger.claim(NOW, 10, LEASE)
        self.assertEqual('a', a.body)


class MongomockLedgerTest(SharedDatabase, ledger_contract.LedgerContract,
                          unittest.TestCase):

    def make_database(self):
        return mongomock_database()


class RealMongoLedgerTest(SharedDatabase, ledger_contract.LedgerContract,
                          unittest.TestCase):

    def make_database(self):
        return real_database(self)

    def test_concurrent_claims_never_overlap(self):
        self.ledger.enqueue(new(strategy=retry.ZAQAR,
                                bodies=[str(i) for i in range(200)]))
        seen = []
        errors = []

        def worker():
            ledger = MongoLedger(self.database)
            try:
                while True:
                    claimed = ledger.claim(NOW, 5, LEASE)
                    if not claimed:
                        return
                    seen.extend(d.id for d in claimed)
            except Exception as exc:
                errors.append(exc)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        self.assertEqual([], errors)
        self.assertEqual(200, len(seen))
        self.assertEqual(200, len(set(seen)))


class UnreachableTest(unittest.TestCase):

    def make_ledger(self, **kwargs):
        with socket.socket() as sock:
            sock.bind(('127.0.0.1', 0))
            port = sock.getsockname()[1]
        client = pymongo.MongoClient('mongodb://127.0.0.1:%d/' % port,
                                     serverSelectionTimeoutMS=200,
                                     connectTimeoutMS=200)
        self.addCleanup(client.close)
        return MongoLedger(client['zaqar'], **kwargs)

    def test_every_call_fails_fast_and_names_the_store(self):
        ledger = self.make_ledger()
        delivery = base.Delivery(
            id=1, project='p', queue='q', subscription_id='s1',
            subscriber='http://127.0.0.1:1/s1', headers={},
            strategy=retry.ZAQAR, policy={}, published=NOW,
            deadline=NOW + 1, body='a', attempts=0, token='t')
        calls = [lambda: ledger.enqueue(new()),
                 lambda: ledger.claim(NOW, 1, LEASE),
                 lambda: ledger.retry(delivery, NOW, 'HTTP 500', NOW),
                 lambda: ledger.finish(delivery, base.DELIVERED, None, NOW),
                 ledger.next_due,
                 ledger.stats,
                 lambda: ledger.forget('p', 'q', 's1')]
        for call in calls:
            started = time.monotonic()
            with self.assertRaises(StoreUnavailable) as caught:
                call()
            self.assertLess(time.monotonic() - started, 5)
            self.assertIn('delivery ledger (mongodb)', str(caught.exception))

    def test_the_store_name_is_the_one_given(self):
        ledger = self.make_ledger(store='subscriptions (mongodb)')
        with self.assertRaises(StoreUnavailable) as caught:
            ledger.next_due()
        self.assertEqual('subscriptions (mongodb)', caught.exception.store)
