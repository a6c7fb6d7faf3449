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

import socket
import threading
import time
import unittest
from unittest import mock

import mongomock
import pymongo

from tests import ledger_contract
from tests.ledger_contract import LEASE
from tests.ledger_contract import new
from tests.ledger_contract import NOW
from tests.unit.store import fixtures
from zaqar_filtering.delivery import ledger as base
from zaqar_filtering.delivery import mongo_ledger
from zaqar_filtering.delivery.mongo_ledger import MongoLedger
from zaqar_filtering.policy import retry
from zaqar_filtering.store.base import StoreUnavailable


def mongomock_database():
    """Return a fresh in-memory mongomock database."""
    return mongomock.MongoClient(tz_aware=True)['test']


def real_database(testcase):
    """Return a fresh database of the real test server, or skip."""
    _, client = fixtures.real_server(
        testcase, 'the ledger suite (it ran against mongomock)')
    return client[fixtures.fresh_database(testcase, client)]


class SharedDatabase:
    """Two ledgers (two server processes) over one database."""

    def make_database(self):
        raise NotImplementedError

    def make_ledger(self):
        self.database = self.make_database()
        return MongoLedger(self.database)

    def claimers(self):
        return [self.ledger, MongoLedger(self.database)]

    def test_two_ledgers_never_claim_the_same_delivery(self):
        other = MongoLedger(self.database)
        subs = ['s%d' % i for i in range(120)]
        self.ledger.enqueue(new(subs=subs, strategy=retry.ZAQAR,
                                bodies=('a', 'b', 'c')))
        seen = []
        ledgers = [self.ledger, other]
        turn = 0
        # Small spreads, so that both ledgers spread chunks in turn.
        with mock.patch.object(mongo_ledger, 'SPREAD_PER_CLAIM', 50):
            while turn < 1000:
                first = ledgers[turn % 2].claim(NOW, 40, LEASE)
                second = ledgers[(turn + 1) % 2].claim(NOW, 30, LEASE)
                if not first and not second:
                    break
                seen.extend((d.id, d.subscription_id, d.body)
                            for d in first + second)
                turn += 1
        self.assertEqual(360, len(seen))
        self.assertEqual(len(seen), len(set(seen)))
        self.assertEqual(360, len({d[0] for d in seen}))
        self.assertEqual(360, len({d[1:] for d in seen}))

    def test_a_chunk_spread_again_after_its_spreader_died_is_not_doubled(self):
        subs = ['s%d' % i for i in range(10)]
        self.ledger.enqueue(new(subs=subs, strategy=retry.ZAQAR,
                                bodies=('a', 'b')))
        deliveries = self.database[mongo_ledger.DELIVERIES]
        insert_many = deliveries.insert_many

        def insert_half_then_die(docs, **kwargs):
            insert_many(docs[:len(docs) // 2], **kwargs)
            raise RuntimeError('the process died')

        with mock.patch.object(self.ledger._deliveries, 'insert_many',
                               insert_half_then_die):
            self.assertRaises(RuntimeError, self.ledger.claim, NOW, 100,
                              LEASE)
        other = MongoLedger(self.database)
        # The dead process's lease holds: what it inserted is handed out,
        # the rest waits.
        early = other.claim(NOW, 100, LEASE)
        self.assertEqual(10, len(early))
        for delivery in early[:6]:
            self.assertTrue(other.finish(delivery, base.DELIVERED, None,
                                         NOW))
        for delivery in early[6:]:
            self.assertTrue(other.retry(delivery, NOW + 1000, 'HTTP 500',
                                        NOW))
        # Spreading waits for the dead process's lease to end.
        self.assertEqual(NOW + mongo_ledger.SPREAD_LEASE, other.next_due())
        # Its lease ended: the chunk is spread again, without duplicates.
        later = other.claim(NOW + mongo_ledger.SPREAD_LEASE + 1, 100, LEASE)
        seen = [(d.subscription_id, d.body) for d in early + later]
        self.assertEqual(20, len(seen))
        self.assertEqual(20, len(set(seen)))
        self.assertEqual(14, sum(s.pending for s in other.stats()))
        batches = self.database[mongo_ledger.BATCHES]
        [batch] = batches.find()
        self.assertEqual((10, 14, False),
                         (batch['spread'], batch['live'], batch['todo']))
        # No tombstone is left once the chunk is committed.
        self.assertEqual(14, deliveries.count_documents({}))
        for delivery in later:
            self.assertTrue(other.finish(delivery, base.DELIVERED, None,
                                         NOW + 40))
        again = other.claim(NOW + 1000, 100, LEASE)
        self.assertEqual(sorted(d.id for d in early[6:]),
                         sorted(d.id for d in again))
        for delivery in again:
            self.assertTrue(other.finish(delivery, base.DELIVERED, None,
                                         NOW + 1000))
        self.assertEqual(0, deliveries.count_documents({}))
        self.assertEqual(0, batches.count_documents({}))
        self.assertEqual(20, sum(s.delivered for s in other.stats()))

    def test_a_finished_batch_leaves_nothing_behind(self):
        subs = ['s%d' % i for i in range(30)]
        self.ledger.enqueue(new(subs=subs, strategy=retry.BACKOFF,
                                bodies=('a', 'b')))
        self.ledger.enqueue(new('s1', bodies=('c',)))
        with mock.patch.object(mongo_ledger, 'SPREAD_PER_CLAIM', 7):
            for _ in range(100):
                claimed = self.ledger.claim(NOW, 10, LEASE)
                if not claimed and self.ledger.next_due() is None:
                    break
                for delivery in claimed:
                    self.assertTrue(self.ledger.finish(
                        delivery, base.DELIVERED, None, NOW))
        self.assertEqual(61, sum(s.delivered for s in self.ledger.stats()))
        self.assertIsNone(self.ledger.next_due())
        for name in (mongo_ledger.BATCHES, mongo_ledger.DELIVERIES):
            self.assertEqual(0, self.database[name].count_documents({}))

    def test_forgotten_targets_of_a_batch_are_skipped_when_spread(self):
        self.ledger.enqueue(new(subs=['s1', 's2'], bodies=('a',)))
        self.assertEqual(0, self.ledger.forget('p', 'q', 's1'))
        [delivery] = self.ledger.claim(NOW, 10, LEASE)
        self.assertEqual('s2', delivery.subscription_id)
        self.assertTrue(self.ledger.finish(delivery, base.DELIVERED, None,
                                           NOW))
        self.assertEqual(
            0, self.database[mongo_ledger.BATCHES].count_documents({}))

    def test_a_huge_batch_is_split_into_documents_in_order(self):
        subs = ['s%d' % i for i in range(25)]
        with mock.patch.object(mongo_ledger, 'BATCH_TARGETS', 10), \
                mock.patch.object(mongo_ledger, 'MESSAGE_BITS', 1):
            self.ledger.enqueue(new(subs=subs, strategy=retry.BACKOFF,
                                    bodies=('a', 'b', 'c')))
            batches = self.database[mongo_ledger.BATCHES]
            # Two windows of messages, each in three parts of targets.
            self.assertEqual(6, batches.count_documents({}))
            order = []
            for _ in range(20):
                claimed = self.ledger.claim(NOW, 100, LEASE)
                if not claimed:
                    break
                for delivery in claimed:
                    order.append((delivery.subscription_id, delivery.body,
                                  delivery.id))
                    self.ledger.finish(delivery, base.DELIVERED, None, NOW)
        self.assertEqual(75, len(order))
        for sub in subs:
            mine = [(i, body) for s, body, i in order if s == sub]
            self.assertEqual(['a', 'b', 'c'], [body for _, body in mine])
            self.assertEqual(sorted(mine), mine)
        self.assertEqual(0, batches.count_documents({}))

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
        # Spread, not claimed yet.
        self.assertEqual([], self.ledger.claim(NOW, 1, LEASE))
        self.assertEqual(NOW + 0.25, self.ledger.next_due())
        [delivery] = self.ledger.claim(NOW + 1, 1, LEASE)
        self.assertEqual((NOW + 0.25, NOW + 0.25 + 86400.0),
                         (delivery.published, delivery.deadline))
        self.assertEqual(NOW + 1 + LEASE, self.ledger.next_due())

    def test_a_backoff_delivery_parked_behind_nothing_is_unparked(self):
        # As if the subscriber's head was finished by another process
        # between enqueue's look at it and the insert.
        self.ledger.enqueue(new(strategy=retry.BACKOFF, bodies=('a',)))
        self.assertEqual([], self.ledger.claim(NOW - 1, 10, LEASE))
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
