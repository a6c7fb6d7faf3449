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

"""What the ledger sender records for a post, and the lease check."""

import json
import time
import unittest

from oslo_config import cfg

from zaqar_filtering.delivery import process
from zaqar_filtering import opts
from zaqar_filtering.stages import sender
from zaqar_filtering.store.base import StoreUnavailable


class RecordingLedger:
    def __init__(self):
        self.recorded = []
        self.down = False

    def enqueue(self, batch):
        if self.down:
            raise StoreUnavailable('delivery ledger (test)', 'refused')
        self.recorded.append(batch)

    def deliveries(self):
        """(subscription, body, headers, strategy, policy) per delivery."""
        return [(t.subscription_id, json.loads(body), b.headers[t.headers],
                 t.strategy, b.policies[t.policy])
                for b in self.recorded for t in b.targets
                for body in b.bodies[t.bodies]]


class RecordingProcess:
    def __init__(self):
        self.items = []

    def put(self, item):
        self.items.append(item)

    def wake(self):
        self.items.append('wake')


def subscription(sub_id, **options):
    return {'id': sub_id, 'source': 'orders', 'options': options,
            'subscriber': 'http://127.0.0.1:1/%s' % sub_id}


class TestLedgerSender(unittest.TestCase):

    def setUp(self):
        self.ledger = RecordingLedger()
        self.process = RecordingProcess()
        self.sender = sender.LedgerSender(self.ledger, self.process, 600)

    def test_records_one_batch_per_post_and_wakes(self):
        before = time.time()
        self.sender.send(
            [subscription('a'),
             subscription('b', post_data='{"m": "$zaqar_message$"}',
                          post_headers={'X-Token': 't'}),
             subscription('c')],
            [{'body': 1}, {'body': 2}], {}, project='p1')
        [batch] = self.ledger.recorded
        self.assertEqual(('p1', 'orders'), (batch.project, batch.queue))
        self.assertGreaterEqual(batch.published, before)
        self.assertEqual(batch.published + 600, batch.deadline)
        plain = {'Content-Type': 'application/json'}
        self.assertEqual(
            [('a', {'body': 1, 'queue_name': 'orders'}, plain),
             ('a', {'body': 2, 'queue_name': 'orders'}, plain),
             ('b', {'m': {'body': 1, 'queue_name': 'orders'}},
              dict(plain, **{'X-Token': 't'})),
             ('b', {'m': {'body': 2, 'queue_name': 'orders'}},
              dict(plain, **{'X-Token': 't'})),
             ('c', {'body': 1, 'queue_name': 'orders'}, plain),
             ('c', {'body': 2, 'queue_name': 'orders'}, plain)],
            [d[:3] for d in self.ledger.deliveries()])
        # What a and c share is kept once.
        self.assertEqual((2, 2, 1), (len(batch.bodies), len(batch.headers),
                                     len(batch.policies)))
        self.assertEqual(['wake'], self.process.items)

    def test_an_ordered_queue_records_the_messages_keys(self):
        prepared = self.sender.prepare([subscription('a')], {})
        posted = [{'body': 1, 'ordering_key': 'k'}, {'body': 2},
                  {'body': 3, 'ordering_key': 'j'}]
        self.sender.deliver(prepared, posted, ordered=True)
        # Not ordered: the key is only a field of the message.
        self.sender.deliver(prepared, posted)
        self.assertEqual([('k', None, 'j'), ()],
                         [batch.keys for batch in self.ledger.recorded])
        self.assertEqual({'body': 1, 'ordering_key': 'k',
                          'queue_name': 'orders'},
                         self.ledger.deliveries()[0][1])

    def test_strategy_follows_zaqars_override_rule(self):
        queue = {'notify_strategy': 'backoff'}
        self.sender.send(
            [subscription('default'),
             subscription('own', _retry_policy={
                 'notify_strategy': 'exponential_decay'}),
             subscription('zaqar', _retry_policy={'minimum_delay': 2})],
            [{'body': 1}], queue)
        self.sender.send(
            [subscription('own', _retry_policy={
                'notify_strategy': 'exponential_decay'})],
            [{'body': 1}], dict(queue, ignore_subscription_override=True))
        self.assertEqual(
            [('default', 'backoff', queue),
             ('own', 'exponential_decay',
              {'notify_strategy': 'exponential_decay'}),
             ('zaqar', 'zaqar', {'minimum_delay': 2}),
             ('own', 'backoff', dict(queue,
                                     ignore_subscription_override=True))],
            [(d[0], d[3], d[4]) for d in self.ledger.deliveries()])

    def test_an_unreachable_ledger_hands_the_batch_over_unrecorded(self):
        self.ledger.down = True
        subscriptions = [subscription('a')]
        with self.assertLogs('zaqar_filtering.stages.sender',
                             'WARNING') as logs:
            self.sender.send(subscriptions, [{'body': 1}], {'x': 1},
                             project='p1')
            self.sender.send(subscriptions, [{'body': 2}], {})
            self.ledger.down = False
            self.sender.send(subscriptions, [{'body': 3}], {})
        # The project travels with them: queue: deliveries need it.
        self.assertEqual([(subscriptions, [{'body': 1}], {'x': 1}, 'p1'),
                          (subscriptions, [{'body': 2}], {}, None), 'wake'],
                         self.process.items)
        self.assertEqual(1, len(self.ledger.recorded))
        self.assertEqual(2, len(logs.output))
        self.assertIn('unrecorded', logs.output[0])
        self.assertIn('is back', logs.output[1])


class InlineExecutor:
    def submit(self, function, *args, **kwargs):
        function(*args, **kwargs)


class RewritingTask:
    """Does what Zaqar's trust+ task does to what it is given."""

    def __init__(self):
        self.seen = []

    def execute(self, subscription, messages, **kwargs):
        self.seen.append(subscription['subscriber'])
        subscription['subscriber'] = subscription['subscriber'][6:]
        messages[0]['touched'] = True


class TestThreadSender(unittest.TestCase):

    def test_tasks_get_copies(self):
        task = RewritingTask()
        threads = sender.ThreadSender(task, InlineExecutor(), None)
        subscriptions = [{'id': 'a', 'subscriber': 'trust+http://x/a'}]
        notifications = [{'body': 1}]
        prepared = threads.prepare(subscriptions, {})
        threads.deliver(prepared, notifications)
        threads.deliver(prepared, notifications)
        self.assertEqual(['trust+http://x/a'] * 2, task.seen)
        self.assertEqual([{'body': 1}], notifications)


class TestProcessSettings(unittest.TestCase):

    def setUp(self):
        self.conf = cfg.ConfigOpts()
        opts.register_opts(self.conf)
        self.conf([], default_config_files=[], default_config_dirs=[])

    def test_a_lease_shorter_than_two_timeouts_is_refused(self):
        self.conf.set_override('delivery_timeout_seconds', 40, 'filtering')
        with self.assertRaises(ValueError) as caught:
            process.check_lease(self.conf)
        self.assertIn('[filtering:delivery] lease_seconds (60.0) must exceed '
                      'twice [filtering] delivery_timeout_seconds (40.0)',
                      str(caught.exception))
        self.conf.set_override('lease_seconds', 81, 'filtering:delivery')
        process.check_lease(self.conf)

    def test_config_args_name_the_files(self):
        conf = cfg.ConfigOpts()
        conf(['--config-file', '/dev/null'], default_config_files=[],
             default_config_dirs=[])
        self.assertEqual(['--config-file', '/dev/null'],
                         process.config_args(conf))
