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

"""The redis delivery ledger against a real redis-server."""

import shutil
import socket
import tempfile
import unittest

import redis

from tests.functional import base
from tests import ledger_contract
from tests import versions_contract
from zaqar_filtering.delivery.redis_ledger import RedisLedger
from zaqar_filtering.store.base import StoreUnavailable
from zaqar_filtering.store.versions import RedisVersions


class RedisLedgerTest(ledger_contract.LedgerContract, unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.workdir = tempfile.mkdtemp(prefix='zaqar-filtering-ledger-')
        cls.addClassCleanup(shutil.rmtree, cls.workdir, ignore_errors=True)
        cls.redis = base.RedisServer(cls.workdir)
        cls.addClassCleanup(cls.redis.stop)
        cls.redis.start()

    def make_ledger(self):
        client = self.client = redis.Redis(host=base.HOST,
                                           port=self.redis.port)
        client.flushall()
        self.addCleanup(client.close)
        return RedisLedger(client)

    def test_a_finished_batch_leaves_only_counts_behind(self):
        self.ledger.enqueue(ledger_contract.new(subs=['s1', 's2'],
                                                bodies=('a', 'b')))
        for delivery in self.claim():
            self.ledger.finish(delivery, 'delivered', None,
                               ledger_contract.NOW)
        self.assertEqual(
            sorted([b'zaqar_filtering.delivery.seq',
                    b'zaqar_filtering.delivery.subs',
                    b'zaqar_filtering.delivery.s.q/s1/p',
                    b'zaqar_filtering.delivery.s.q/s2/p']),
            sorted(self.client.keys('*')))

    def test_ordering_keys_leave_nothing_behind(self):
        self.ledger.enqueue(ledger_contract.keyed(
            ('a1', 'a'), ('a2', 'a'), ('b1', 'b'), subs=['s1', 's2']))
        self.ledger.forget('p', 'q', 's2')
        for _ in range(3):
            for delivery in self.claim():
                self.ledger.finish(delivery, 'delivered', None,
                                   ledger_contract.NOW)
        self.assertEqual([], self.client.keys('zaqar_filtering.delivery.o.*'))
        self.assertEqual([], self.client.keys('zaqar_filtering.delivery.q*'))
        self.assertEqual([], self.client.keys('zaqar_filtering.delivery.e.*'))

    def test_a_slow_claim_is_not_sent_twice(self):
        # Zaqar's client gives up after 0.1 s (here 1 ms, shorter than
        # spreading 1,000 deliveries takes) and redis-py then sends the
        # command again: the first claim's deliveries would wait a lease.
        ledger = RedisLedger(redis.Redis(host=base.HOST, port=self.redis.port,
                                         socket_timeout=0.001))
        subs = ['s%04d' % number for number in range(1000)]
        ledger.enqueue(ledger_contract.new(subs=subs))
        claimed = ledger.claim(ledger_contract.NOW, 2, ledger_contract.LEASE)
        self.assertEqual(2, len(claimed))
        self.assertEqual(998, len(self.claim(limit=1000)))

    def test_unreachable_redis_is_store_unavailable(self):
        with socket.socket() as sock:
            sock.bind((base.HOST, 0))
            port = sock.getsockname()[1]
        ledger = RedisLedger(redis.Redis(host=base.HOST, port=port,
                                         socket_connect_timeout=0.5))
        with self.assertRaises(StoreUnavailable) as caught:
            ledger.enqueue(ledger_contract.new())
        self.assertIn('delivery ledger (redis)', str(caught.exception))


class RedisVersionsTest(versions_contract.VersionsContract,
                        unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.workdir = tempfile.mkdtemp(prefix='zaqar-filtering-versions-')
        cls.addClassCleanup(shutil.rmtree, cls.workdir, ignore_errors=True)
        cls.redis = base.RedisServer(cls.workdir)
        cls.addClassCleanup(cls.redis.stop)
        cls.redis.start()

    def make_versions(self):
        client = redis.Redis(host=base.HOST, port=self.redis.port)
        client.flushall()
        self.addCleanup(client.close)
        return RedisVersions(client)
