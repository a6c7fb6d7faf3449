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

"""The mongodb policy store: against mongomock, and a real MongoDB if set.

``StoreContract`` runs once per back end; the real-server class skips with
a message naming ZAQAR_FILTERING_TEST_MONGODB_URL when it is not set.
"""

import datetime
import time
import unittest

from oslo_config import cfg

from tests.unit.store import fixtures
from tests import versions_contract
from zaqar_filtering import opts
from zaqar_filtering.store.base import StoreUnavailable
from zaqar_filtering.store import load_store
from zaqar_filtering.store.mongodb import MongoStore
from zaqar_filtering.store.record import build_record
from zaqar_filtering.store.sync import sync_queue
from zaqar_filtering.store.versions import Version

UTC = datetime.timezone.utc


def record(sub_id, tags=None, project='p', queue='q', hours=1,
           subscriber=None):
    expires = datetime.datetime.now(UTC) + datetime.timedelta(hours=hours)
    return build_record(project, queue, sub_id,
                        subscriber or 'http://x/%s' % sub_id,
                        {'filter_policies': tags} if tags else {}, expires)


def listed(sub_id, options=None, ttl=3600, age=0):
    return {'id': sub_id, 'source': 'q', 'subscriber': 'http://x/%s' % sub_id,
            'ttl': ttl, 'age': age, 'options': options or {},
            'confirmed': True}


class StoreContract:
    """What every store that keeps records must do."""

    def make_store(self):
        raise NotImplementedError

    def setUp(self):
        super().setUp()
        self.store = self.make_store()

    def test_write_then_load(self):
        result = self.store.write([record('a', ['x']), record('b')])
        self.assertEqual((2, 0), (result.written, result.unchanged))
        loaded = self.store.load('p', 'q')
        self.assertEqual({'a', 'b'}, set(loaded))
        self.assertEqual({'filter_policies': ['x']}, loaded['a'].policy)
        self.assertEqual(('tags',), loaded['a'].kinds)
        self.assertEqual('http://x/b', loaded['b'].subscriber)

    def test_a_second_write_of_the_same_records_changes_nothing(self):
        self.store.write([record('a', ['x']), record('b')])
        result = self.store.write([record('a', ['x']), record('b')])
        self.assertEqual((0, 2), (result.written, result.unchanged))
        result = self.store.write([record('a', ['y']), record('b')])
        self.assertEqual((1, 1), (result.written, result.unchanged))
        self.assertEqual({'filter_policies': ['y']},
                         self.store.load('p', 'q')['a'].policy)

    def test_one_document_per_subscription(self):
        self.store.write([record('a', ['x'])])
        self.store.write([record('a', ['y'])])
        self.assertEqual(1, self.store._policies.count_documents({}))

    def test_expired_records_are_not_loaded(self):
        self.store.write([record('old', hours=-1), record('new')])
        self.assertEqual({'new'}, set(self.store.load('p', 'q')))

    def test_projects_never_see_each_other(self):
        self.store.write([record('a', ['x'], project='p1'),
                          record('b', ['y'], project='p2'),
                          record('c', project=None)])
        self.assertEqual({'a'}, set(self.store.load('p1', 'q')))
        self.assertEqual({'b'}, set(self.store.load('p2', 'q')))
        self.assertEqual({'c'}, set(self.store.load(None, 'q')))
        self.assertEqual(0, self.store.delete('p2', 'q', ['a']))
        self.assertEqual({'a'}, set(self.store.load('p1', 'q')))
        self.assertEqual([('p1', 'q')], list(self.store.queues('p1')))
        self.assertEqual([(None, 'q'), ('p1', 'q'), ('p2', 'q')],
                         list(self.store.queues()))

    def test_delete(self):
        self.store.write([record('a'), record('b'), record('c')])
        self.assertEqual(2, self.store.delete('p', 'q', ['a', 'c', 'zz']))
        self.assertEqual({'b'}, set(self.store.load('p', 'q')))

    def test_indexes(self):
        self.store.load('p', 'q')
        indexes = self.store._policies.index_information()
        key = indexes['project_queue_subscription']
        self.assertTrue(key['unique'])
        self.assertEqual(['project', 'queue', 'subscription_id'],
                         [field for field, _ in key['key']])
        self.assertEqual(0, indexes['expires_ttl']['expireAfterSeconds'])

    def test_versions(self):
        self.assertEqual(Version(0, 0), self.store.version('p', 'q'))
        self.assertEqual(1, self.store.change_started('p', 'q'))
        self.assertEqual(2, self.store.change_started('p', 'q'))
        self.assertEqual(Version(2, 0), self.store.version('p', 'q'))
        self.store.changes_landed('p', 'q', 2)
        self.store.changes_landed('p', 'q', 1)      # never goes back
        self.assertEqual(Version(2, 2), self.store.version('p', 'q'))
        self.assertEqual(Version(0, 0), self.store.version('other', 'q'))
        self.assertEqual(Version(0, 0), self.store.version(None, 'q'))

    def test_sync_queue(self):
        self.store.write([record('gone'), record('a', ['old'])])
        self.store.write([record('elsewhere', project='p2')])
        result = sync_queue(self.store, 'p', 'q', [
            listed('a', {'filter_policies': ['new']}), listed('b'),
            listed('bad', {'filter_policies': 'not a list'})],
            limits=opts_limits())
        self.assertEqual((2, 0, 1), (result.written, result.unchanged,
                                     result.deleted))
        self.assertEqual(['bad'], list(result.invalid))
        self.assertEqual({'a', 'b'}, set(self.store.load('p', 'q')))
        self.assertEqual({'elsewhere'}, set(self.store.load('p2', 'q')))
        again = sync_queue(self.store, 'p', 'q', [
            listed('a', {'filter_policies': ['new']}), listed('b')],
            limits=opts_limits())
        self.assertEqual((0, 2, 0), (again.written, again.unchanged,
                                     again.deleted))


def opts_limits():
    conf = cfg.ConfigOpts()
    opts.register_opts(conf)
    return opts.limits_from_conf(conf)


class TestMongomockStore(StoreContract, unittest.TestCase):

    def make_store(self):
        return fixtures.mongomock_store()


class TestRealMongoStore(StoreContract, unittest.TestCase):

    def make_store(self):
        return fixtures.real_store(self)


class TestMongomockVersions(versions_contract.VersionsContract,
                            unittest.TestCase):

    def make_versions(self):
        return fixtures.mongomock_store()._versions


class TestRealMongoVersions(versions_contract.VersionsContract,
                            unittest.TestCase):

    def make_versions(self):
        return fixtures.real_store(self)._versions


class TestUnreachable(unittest.TestCase):

    def test_every_call_fails_fast_and_clearly(self):
        store = fixtures.unreachable_store()
        self.addCleanup(store.close)
        calls = [lambda: store.version('p', 'q'),
                 lambda: store.change_started('p', 'q'),
                 lambda: store.changes_landed('p', 'q', 1),
                 lambda: store.load('p', 'q'),
                 lambda: store.write([record('a')]),
                 lambda: store.delete('p', 'q', ['a'])]
        for call in calls:
            started = time.monotonic()
            with self.assertRaises(StoreUnavailable) as caught:
                call()
            self.assertLess(time.monotonic() - started, 5)
            self.assertIn('policy store mongodb is unavailable',
                          str(caught.exception))


class TestLoadStore(unittest.TestCase):

    def conf(self, **overrides):
        conf = cfg.ConfigOpts()
        opts.register_opts(conf)
        conf([], default_config_files=[], default_config_dirs=[])
        for name, value in overrides.items():
            group, _, option = name.rpartition('__')
            conf.set_override(option, value,
                              {'': opts.GROUP_NAME,
                               'mongodb': opts.MONGODB_GROUP_NAME}[group])
        return conf

    def test_unknown_driver_names_the_option_and_the_choices(self):
        with self.assertRaises(ValueError) as caught:
            load_store(self.conf(policy_store='redis'))
        self.assertEqual('[filtering] policy_store = redis: no such driver '
                         'in the entry point namespace '
                         'zaqar_filtering.policy_stores; installed: mongodb, '
                         'subscriptions', str(caught.exception))

    def test_mongodb_needs_a_uri(self):
        with self.assertRaises(ValueError) as caught:
            load_store(self.conf(policy_store='mongodb'))
        self.assertIn('[filtering:mongodb] uri must be set',
                      str(caught.exception))

    def test_mongodb_driver_with_its_options(self):
        store = load_store(self.conf(
            policy_store='mongodb',
            mongodb__uri='mongodb://127.0.0.1:1/',
            mongodb__database='db', mongodb__collection='pol',
            mongodb__server_selection_timeout_seconds=0.5))
        self.addCleanup(store.close)
        self.assertIsInstance(store, MongoStore)
        self.assertEqual('db', store._policies.database.name)
        self.assertEqual('pol', store._policies.name)
        self.assertEqual(500, store._client.options.server_selection_timeout
                         * 1000)

    def test_for_uri_takes_the_database_of_the_uri(self):
        store = MongoStore.for_uri('mongodb://127.0.0.1:1/backfilled')
        self.addCleanup(store.close)
        self.assertEqual('backfilled', store._policies.database.name)
        store = MongoStore.for_uri('mongodb://127.0.0.1:1/backfilled',
                                   database='other')
        self.addCleanup(store.close)
        self.assertEqual('other', store._policies.database.name)
        store = MongoStore.for_uri('mongodb://127.0.0.1:1/')
        self.addCleanup(store.close)
        self.assertEqual('zaqar_filtering', store._policies.database.name)

    def test_for_uri_rejects_what_is_not_a_mongodb_uri(self):
        self.assertRaisesRegex(ValueError, 'not a MongoDB URI',
                               MongoStore.for_uri, 'http://127.0.0.1/')
