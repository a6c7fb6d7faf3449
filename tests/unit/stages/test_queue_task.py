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

import json
import unittest

from oslo_config import cfg

from zaqar_filtering import InvalidPolicy
from zaqar_filtering.stages import queue_task


class FakeQueues:
    def __init__(self, queues):
        self.queues = queues

    def exists(self, name, project=None):
        return (project, name) in self.queues

    def get_metadata(self, name, project=None):
        return self.queues[(project, name)]


class FakeMessages:
    def __init__(self, fail=None):
        self.posted = []
        self.fail = fail

    def post(self, queue, messages, client_uuid, project=None):
        if self.fail:
            raise self.fail
        self.posted.append((project, queue, messages))
        return ['id']


class FakeStorage:
    def __init__(self, queues, fail=None):
        self.conf = cfg.ConfigOpts()
        self.queue_controller = FakeQueues(queues)
        self.message_controller = FakeMessages(fail)


def notification(**fields):
    return json.dumps(dict({'body': {'n': 1}, 'ttl': 60,
                            'Message_Type': 'Notification',
                            'queue_name': 'topic:orders'}, **fields))


class TestTargetQueue(unittest.TestCase):

    def test_names_the_queue(self):
        self.assertEqual('orders-1.eu_x',
                         queue_task.target_queue('queue:orders-1.eu_x'))

    def test_bad_names_name_the_rule(self):
        for subscriber, rule in (('queue:', 'queue_name_empty'),
                                 ('queue:a/b', 'queue_name_characters'),
                                 ('queue:a b', 'queue_name_characters'),
                                 ('queue:' + 'x' * 65, 'queue_name_length')):
            with self.assertRaises(InvalidPolicy) as caught:
                queue_task.target_queue(subscriber)
            self.assertEqual(rule, caught.exception.rule)
            self.assertEqual('subscriber', caught.exception.option)

    def test_subscription_checks(self):
        queue_task.check_subscription('http://x', {'post_data': 'x'}, None)
        queue_task.check_subscription('queue:a', {}, object())
        with self.assertRaises(InvalidPolicy) as caught:
            queue_task.check_subscription('queue:a', {'post_data': '{}'},
                                          object())
        self.assertEqual('post_data', caught.exception.option)
        with self.assertRaises(InvalidPolicy) as caught:
            queue_task.check_subscription('queue:a', {}, None)
        self.assertEqual('queue_subscriber_ledger', caught.exception.rule)


class TestQueueTask(unittest.TestCase):

    def test_posts_body_ttl_and_filter_fields_into_the_project(self):
        storage = FakeStorage({('p1', 'orders'): {}})
        task = queue_task.QueueTask(storage=storage)
        error = task.attempt('queue:orders', notification(
            routing_key='a.b', filter_policies=['x'],
            attributes={'k': 'v'}), {}, project='p1')
        self.assertIsNone(error)
        self.assertEqual([('p1', 'orders', [{
            'body': {'n': 1}, 'ttl': 60, 'routing_key': 'a.b',
            'filter_policies': ['x'], 'attributes': {'k': 'v'}}])],
            storage.message_controller.posted)

    def test_another_projects_queue_is_missing(self):
        storage = FakeStorage({('p2', 'orders'): {}})
        task = queue_task.QueueTask(storage=storage)
        error = task.attempt('queue:orders', notification(), {},
                             project='p1')
        self.assertEqual('queue orders does not exist in project p1', error)
        self.assertEqual([], storage.message_controller.posted)

    def test_message_larger_than_the_queue_takes(self):
        storage = FakeStorage({('p1', 'small'): {
            '_max_messages_post_size': 10}})
        error = queue_task.QueueTask(storage=storage).attempt(
            'queue:small', notification(), {}, project='p1')
        self.assertIn('at most 10 (_max_messages_post_size)', error)

    def test_storage_failure_is_a_failed_attempt(self):
        storage = FakeStorage({('p1', 'orders'): {}},
                              fail=RuntimeError('redis is gone'))
        error = queue_task.QueueTask(storage=storage).attempt(
            'queue:orders', notification(), {}, project='p1')
        self.assertEqual('RuntimeError: redis is gone', error)

    def test_not_a_notification(self):
        storage = FakeStorage({('p1', 'orders'): {}})
        error = queue_task.QueueTask(storage=storage).attempt(
            'queue:orders', 'not json', {}, project='p1')
        self.assertIn('not a queue delivery', error)
