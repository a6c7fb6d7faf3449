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

"""Ordered claims on MongoDB: over mongomock, and over a real MongoDB."""

import datetime
import time
import unittest
from unittest import mock

import bson
import mongomock
from oslo_config import cfg
import pymongo

from tests.unit.store import fixtures
from zaqar_filtering import ordering
from zaqar_filtering.ordering import mongodb

SCOPE = 'project/queue'
NOW = 1_800_000_000


def document(k, key=None, claimed_until=0, visible=0, expires=NOW + 60,
             tx=None, scope=SCOPE):
    found = {'_id': bson.ObjectId(), 'p_q': scope, 'k': k, 'd': visible,
             'c': {'id': None, 'e': claimed_until, 'c': 0}, 'tx': tx,
             'e': datetime.datetime.fromtimestamp(
                 expires, tz=datetime.UTC).replace(tzinfo=None)}
    if key is not None:
        found[mongodb.KEY_FIELD] = key
    return found


class TestClaimable(unittest.TestCase):

    def setUp(self):
        super().setUp()
        self.collection = mongomock.MongoClient()['db']['messages']

    def claimable(self, *documents, limit=10):
        if documents:
            self.collection.insert_many(list(documents))
        return [found['k'] for found in mongodb.claimable(
            self.collection, SCOPE, NOW, limit)]

    def test_only_the_head_of_each_key(self):
        self.assertEqual([1, 2, 5], self.claimable(
            document(1, 'a'), document(2, 'b'), document(3, 'a'),
            document(4, 'b'), document(5)))

    def test_a_claimed_head_blocks_its_key_until_the_claim_expires(self):
        self.assertEqual([2], self.claimable(
            document(1, 'a', claimed_until=NOW + 1), document(2, 'b'),
            document(3, 'a')))
        self.collection.update_one({'k': 1}, {'$set': {'c.e': NOW}})
        self.assertEqual([1, 2], self.claimable())

    def test_a_deleted_or_expired_head_unblocks_the_next(self):
        self.assertEqual([2], self.claimable(
            document(1, 'a', claimed_until=NOW + 1, expires=NOW),
            document(2, 'a'), document(3, 'a')))
        self.collection.delete_one({'k': 2})
        self.assertEqual([3], self.claimable())

    def test_order_is_by_visibility_then_posting(self):
        # Posted first but visible later: the later post is the head.
        self.assertEqual([2], self.claimable(
            document(1, 'a', visible=NOW - 1),
            document(2, 'a', visible=NOW - 5)))
        self.collection.delete_many({})
        # Not yet visible: it blocks nothing and is not claimable.
        self.assertEqual([2], self.claimable(
            document(1, 'a', visible=NOW + 5), document(2, 'a')))

    def test_unfinished_posts_and_other_queues_are_ignored(self):
        self.assertEqual([3], self.claimable(
            document(1, 'a', tx=bson.ObjectId()), document(2, 'b',
                                                           scope='p/other'),
            document(3, 'a')))

    def test_limit_takes_the_oldest(self):
        self.assertEqual([1, 2], self.claimable(
            document(1, 'a'), document(2), document(3, 'b'), document(4),
            limit=2))


class TestKeyingCollection(unittest.TestCase):

    def test_keys_are_added_to_the_inserted_documents(self):
        collection = mongomock.MongoClient()['db']['messages']
        keying = mongodb._KeyingCollection(collection, ['a', None, 'b'])
        keying.insert_many([{'n': 1}, {'n': 2}, {'n': 3}])
        self.assertEqual([('a', 1), (None, 2), ('b', 3)],
                         [(found.get('zk'), found['n'])
                          for found in collection.find(sort=[('n', 1)])])
        self.assertEqual(3, keying.count_documents({}))


def zaqar_drivers(uri, database):
    """Return Zaqar's MongoDB (data, control) drivers on ``database``."""
    from osprofiler import opts as profiler_opts
    from zaqar.common import cache as oslo_cache
    from zaqar.conf import opts as zaqar_opts
    from zaqar.storage.mongodb import driver

    conf = cfg.ConfigOpts()
    conf(args=[], project='zaqar')
    for group, options in zaqar_opts.list_opts():
        conf.register_opts(options,
                           group=None if group == 'DEFAULT' else group)
    profiler_opts.set_defaults(conf)
    # One node is enough here (Zaqar wants a replica set otherwise).
    conf.set_override('unreliable', True)
    for group in ('drivers:message_store:mongodb',
                  'drivers:management_store:mongodb'):
        conf.set_override('uri', uri, group=group)
        conf.set_override('database', database, group=group)
    oslo_cache.register_config(conf)
    cache = oslo_cache.get_cache(conf)
    control = driver.ControlDriver(conf, cache)
    control.connection
    return driver.DataDriver(conf, cache, control), control


class ControllersContract:
    """Zaqar's own MongoDB driver, with the ordering controllers."""

    def drivers(self):
        raise NotImplementedError

    def setUp(self):
        super().setUp()
        self.driver, control = self.drivers()
        self.backend = ordering.backend_for(self.driver)
        self.project = 'p'
        control.queue_controller.create('q', {'_ordered_by_key': True},
                                        project=self.project)

    def post(self, *keys):
        return self.backend.messages.post(
            'q', [{'ttl': 60, 'body': i, 'ordering_key': key}
                  for i, key in enumerate(keys)],
            '5f6b6f3a-4bc4-4b29-9ab8-7c8ad3c1c1b1', project=self.project)

    def claim(self, ttl=60):
        claim_id, found = self.backend.claims.create(
            'q', {'ttl': ttl, 'grace': 0}, project=self.project)
        return claim_id, [message['body'] for message in found]

    def test_heads_then_the_next_after_a_delete(self):
        ids = self.post('a', 'b', 'a', None)
        claim_id, bodies = self.claim()
        self.assertEqual([0, 1, 3], bodies)
        self.assertEqual([], self.claim()[1])
        self.driver.message_controller.delete('q', ids[0], self.project,
                                              claim=claim_id)
        self.assertEqual([2], self.claim()[1])

    def test_unkeyed_messages_have_their_own_range_of_an_index(self):
        self.post('a', None, 'b')
        collection = self.backend.messages._collection('q', self.project)
        indexes = {index['name']: list(index['key'].items())
                   for index in collection.list_indexes()}
        self.assertEqual(mongodb.ORDERING_INDEX_FIELDS,
                         [(field, int(order)) for field, order
                          in indexes['ordering']])
        self.assertEqual([1], [message['b'] for message in collection.find(
            {mongodb.KEY_FIELD: None}).hint('ordering')])

    def test_a_released_claim_gives_the_same_message(self):
        self.post('a', 'a')
        claim_id, bodies = self.claim()
        self.assertEqual([0], bodies)
        self.driver.claim_controller.delete('q', claim_id, self.project)
        self.assertEqual([0], self.claim()[1])

    def test_an_expired_claim_gives_the_same_message(self):
        self.post('a', 'a')
        self.assertEqual([0], self.claim(ttl=1)[1])
        self.assertEqual([], self.claim()[1])
        time.sleep(2.1)
        self.assertEqual([0], self.claim()[1])


class TestMongomockControllers(ControllersContract, unittest.TestCase):

    def drivers(self):
        client = mongomock.MongoClient()
        # What Zaqar's driver asks of a real client, mongomock lacks.
        client.nodes = frozenset()
        client.write_concern = pymongo.WriteConcern(w=2)
        with mock.patch('pymongo.MongoClient', lambda *args, **kw: client):
            return zaqar_drivers('mongodb://mongomock.invalid', 'zaqar')


class TestRealMongoDBControllers(ControllersContract, unittest.TestCase):

    def drivers(self):
        uri, client = fixtures.real_server(self, 'ordered claims')
        return zaqar_drivers(uri, fixtures.fresh_database(self, client,
                                                          'ordering_'))
