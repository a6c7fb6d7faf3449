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

"""The notifier stage: who gets which messages, and what they get."""

import copy
import unittest

from oslo_config import cfg

from tests.unit.stages.test_matcher_cache import FakeSubscriptions
from tests.unit.store import fixtures
from zaqar_filtering.stages.notifier import NotifierStage
from zaqar_filtering.stages import sender

SCENARIO_TAGS = ['apple', 'imac', 'iphone', 'macbook']


class FakeQueues:
    def __init__(self, metadata=None):
        self.metadata = metadata or {}

    def get(self, queue, project=None):
        return self.metadata


class RecordingSender(sender.Sender):
    def __init__(self):
        self.calls = []
        self.prepared = 0
        self.ordered = []

    def prepare(self, subscriptions, retry_policy):
        self.prepared += 1
        return super().prepare(subscriptions, retry_policy)

    def deliver(self, prepared, notifications, project=None, ordered=False):
        self.ordered.append(ordered)
        super().deliver(prepared, notifications, project=project)

    def send(self, subscriptions, messages, retry_policy, project=None):
        for subscription in subscriptions:
            self.calls.append((subscription['id'], messages, retry_policy))


class TestNotifierStage(unittest.TestCase):

    def setUp(self):
        self.addCleanup(cfg.CONF.reset)
        self.store = FakeSubscriptions()
        self.task = RecordingSender()
        self.mail = RecordingSender()
        self.queues = FakeQueues({'_retry_policy': {'minimum_delay': 2}})

    def stage(self, **kwargs):
        return NotifierStage(
            subscription_controller=self.store, queue_controller=self.queues,
            senders={'http': self.task, 'mailto': self.mail},
            store=fixtures.mongomock_store(), **kwargs)

    def received(self, task=None):
        found = {}
        for sub_id, messages, _ in (task or self.task).calls:
            found.setdefault(sub_id, []).extend(m['body'] for m in messages)
        return found

    def test_seed_scenario_1(self):
        for name, tags in (('A', ['apple']), ('B', ['xiaomi']),
                           ('C', ['imac', 'xiaomi']), ('D', None)):
            self.store.put('p', 'q', name, {'filter_policies': tags}
                           if tags else {})
        messages = [{'ttl': 60, 'body': i, 'filter_policies': SCENARIO_TAGS}
                    for i in range(100)] + [{'ttl': 60, 'body': 'untagged'}]
        self.assertIsNone(self.stage().post('q', messages, 'uuid', 'p'))
        received = self.received()
        self.assertEqual({'A', 'C', 'D'}, set(received))
        self.assertEqual(list(range(100)), received['A'])
        self.assertEqual(list(range(100)), received['C'])
        self.assertEqual(list(range(100)) + ['untagged'], received['D'])

    def test_notifications_carry_filter_fields_and_leave_input_alone(self):
        self.store.put('p', 'q', 'a', {'binding_keys': ['order.#']})
        messages = [{'ttl': 60, 'body': {'n': 1}, 'routing_key': 'order.eu',
                     'attributes': {'k': 'v'}}]
        before = copy.deepcopy(messages)
        self.stage().post('q', messages, 'uuid', 'p')
        [(sub_id, sent, retry_policy)] = self.task.calls
        self.assertEqual([dict(before[0], Message_Type='Notification')], sent)
        self.assertEqual(before, messages)
        self.assertEqual({'minimum_delay': 2}, retry_policy)

    def test_senders_learn_whether_the_queue_is_ordered_by_key(self):
        self.store.put('p', 'q', 'a', {})
        stage = self.stage()
        message = {'body': 1, 'ordering_key': 'k'}
        stage.post('q', [message], 'u', 'p')
        self.queues.metadata = {'_ordered_by_key': True}
        stage.post('q', [message], 'u', 'p')
        self.assertEqual([False, True], self.task.ordered)
        self.assertEqual('k', self.task.calls[1][1][0]['ordering_key'])

    def test_schemes_go_to_their_task(self):
        self.store.put('p', 'q', 'web', {})
        self.store.put('p', 'q', 'mail', {})
        self.store.queues[('p', 'q')]['mail']['subscriber'] = 'mailto:a@b.c'
        self.store.put('p', 'q', 'odd', {})
        self.store.queues[('p', 'q')]['odd']['subscriber'] = 'ftp://x'
        with self.assertLogs('zaqar_filtering.stages.notifier', 'ERROR'):
            self.stage().post('q', [{'body': 1}], 'uuid', 'p')
        self.assertEqual({'web': [1]}, self.received())
        self.assertEqual({'mail': [1]}, self.received(self.mail))

    def test_unconfirmed_subscriptions_wait_when_confirmation_is_required(
            self):
        self.store.put('p', 'q', 'yes', {})
        self.store.put('p', 'q', 'no', {})
        self.store.queues[('p', 'q')]['no']['confirmed'] = False
        self.stage(require_confirmation=True).post('q', [{'body': 1}], 'u',
                                                   'p')
        self.assertEqual({'yes': [1]}, self.received())
        self.task.calls.clear()
        self.stage().post('q', [{'body': 2}], 'u', 'p')
        self.assertEqual({'yes': [2], 'no': [2]}, self.received())

    def test_deliveries_are_prepared_once_per_set_of_subscriptions(self):
        for name in 'abc':
            self.store.put('p', 'q', name, {'filter_policies': [name, 'all']})
        stage = self.stage()
        for body in range(3):
            stage.post('q', [{'body': body, 'filter_policies': ['all']}],
                       'u', 'p')
        stage.post('q', [{'body': 3, 'filter_policies': ['a']}], 'u', 'p')
        self.assertEqual(2, self.task.prepared)
        # Another queue retry policy: prepared again.
        self.queues.metadata = {'_retry_policy': {'minimum_delay': 3}}
        stage.post('q', [{'body': 4, 'filter_policies': ['a']}], 'u', 'p')
        self.assertEqual(3, self.task.prepared)
        self.assertEqual({'a': [0, 1, 2, 3, 4], 'b': [0, 1, 2],
                          'c': [0, 1, 2]}, self.received())

    def test_consecutive_messages_for_the_same_subscriptions_go_together(
            self):
        self.store.put('p', 'q', 'a', {'filter_policies': ['a']})
        self.store.put('p', 'q', 'b', {'filter_policies': ['b']})
        self.stage().post('q', [
            {'body': 0, 'filter_policies': ['a']},
            {'body': 1, 'filter_policies': ['a']},
            {'body': 2, 'filter_policies': ['b']},
            {'body': 3, 'filter_policies': ['a']}], 'u', 'p')
        self.assertEqual([('a', [0, 1]), ('b', [2]), ('a', [3])],
                         [(sub_id, [m['body'] for m in messages])
                          for sub_id, messages, _ in self.task.calls])

    def test_no_match_no_delivery_and_no_queue_read(self):
        self.store.put('p', 'q', 'a', {'filter_policies': ['x']})
        self.queues.get = None          # would raise if called
        self.stage().post('q', [{'body': 1}], 'uuid', 'p')
        self.assertEqual([], self.task.calls)

    def test_debug_log_names_the_matches(self):
        for number in range(25):
            self.store.put('p', 'q', 'sub%02d' % number, {})
        self.store.put('p', 'q', 'other', {'filter_policies': ['x']})
        with self.assertLogs('zaqar_filtering.stages.notifier',
                             'DEBUG') as logs:
            self.stage().post('q', [{'body': 1}], 'uuid', 'p')
        self.assertRegex(logs.output[0], r'Queue q \(project p\): 1 messages '
                         r'matched 25 of 26 subscriptions in [\d.]+ ms: '
                         r'(sub\d\d, ){19}sub\d\d and 5 more$')
