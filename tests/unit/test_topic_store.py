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

import unittest

import mongomock
from zaqar.storage import errors as storage_errors

from tests.unit.store import fixtures
from zaqar_filtering import topic_store


class TopicsContract:
    """What every topic registry does; ``self.topics`` is one."""

    def test_put_get_and_replace(self):
        self.assertTrue(self.topics.put('p', 'orders', {'a': 1}))
        self.assertFalse(self.topics.put('p', 'orders', {'a': 2}))
        self.assertEqual({'a': 2}, self.topics.get('p', 'orders'))

    def test_missing_topic(self):
        self.assertRaises(storage_errors.TopicDoesNotExist,
                          self.topics.get, 'p', 'nope')
        self.assertFalse(self.topics.exists('p', 'nope'))

    def test_ensure_keeps_metadata(self):
        self.topics.put('p', 'orders', {'a': 1})
        self.topics.ensure('p', 'orders')
        self.topics.ensure('p', 'new')
        self.assertEqual({'a': 1}, self.topics.get('p', 'orders'))
        self.assertEqual({}, self.topics.get('p', 'new'))

    def test_names_page_by_marker_per_project(self):
        for name in ('c', 'a', 'b'):
            self.topics.put('p', name, {})
        self.topics.put('other', 'z', {})
        self.topics.put(None, 'y', {})
        self.assertEqual(['a', 'b'], self.topics.names('p', limit=2))
        self.assertEqual(['c'], self.topics.names('p', marker='b'))
        self.assertEqual(['y'], self.topics.names(None))

    def test_projects_and_all_names(self):
        for name in ('c', 'a', 'b'):
            self.topics.put('p', name, {})
        self.topics.put(None, 'y', {})
        self.topics.put('gone', 'x', {})
        self.topics.delete('gone', 'x')
        self.assertEqual([None, 'p'], self.topics.projects())
        self.assertEqual(['a', 'b', 'c'],
                         list(self.topics.all_names('p', page_size=2)))
        self.assertEqual([], list(self.topics.all_names('gone')))

    def test_delete(self):
        self.topics.put('p', 'orders', {})
        self.topics.delete('p', 'orders')
        self.topics.delete('p', 'orders')
        self.assertFalse(self.topics.exists('p', 'orders'))


class TestMongoTopics(TopicsContract, unittest.TestCase):

    def setUp(self):
        super().setUp()
        self.topics = topic_store.MongoTopics(
            mongomock.MongoClient().db[topic_store.COLLECTION])


class TestRealMongoTopics(TopicsContract, unittest.TestCase):

    def setUp(self):
        super().setUp()
        _, client = fixtures.real_server(self, 'the topic registry suite')
        database = fixtures.fresh_database(self, client, 'topics_')
        self.topics = topic_store.MongoTopics(
            client[database][topic_store.COLLECTION])


class TestSources(unittest.TestCase):

    def test_topic_sources_are_no_queue_names(self):
        self.assertEqual('topic:orders', topic_store.source_of('orders'))
        self.assertEqual('orders', topic_store.topic_of('topic:orders'))
        self.assertIsNone(topic_store.topic_of('orders'))
