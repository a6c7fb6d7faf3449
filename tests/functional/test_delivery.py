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

"""Webhook delivery: the task's requests, retries and timeouts against a
real HTTP receiver, and the delivery process's life cycle."""

import copy
import multiprocessing
import os
import socket
import subprocess
import sys
import textwrap
import time
import unittest

from tests.functional import base
from zaqar_filtering.stages import sender
from zaqar_filtering.stages.webhook import WebhookTask

# Only immediate retries: Zaqar's API would not accept delays this short.
TWO_QUICK_RETRIES = {'retries_with_no_delay': 2, 'minimum_delay_retries': 0,
                     'minimum_delay': 0, 'maximum_delay': 0,
                     'maximum_delay_retries': 0}


def subscription(url, **options):
    return {'id': 'sub', 'source': 'orders', 'subscriber': url,
            'options': options}


class TestWebhookTask(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.receiver = base.WebhookReceiver().start()
        cls.addClassCleanup(cls.receiver.stop)

    def setUp(self):
        self.path = self.id().rsplit('.', 1)[-1]
        self.task = WebhookTask(timeout=2)

    def test_posts_each_message_on_one_connection_without_changing_it(self):
        messages = [{'body': i, 'ttl': 60, 'Message_Type': 'Notification'}
                    for i in range(5)]
        before = copy.deepcopy(messages)
        self.task.execute(subscription(self.receiver.url(self.path)),
                          messages)
        received = self.receiver.wait_for(5, self.path)
        self.assertEqual([dict(m, queue_name='orders') for m in before],
                         [r.json for r in received])
        self.assertEqual(1, len({r.peer for r in received}))
        self.assertEqual(before, messages)

    def test_a_subscriber_that_closes_connections(self):
        self.task.execute(subscription(self.receiver.url(
            'close/' + self.path)), [{'body': i} for i in range(3)])
        received = self.receiver.wait_for(3, 'close/' + self.path)
        self.assertEqual([0, 1, 2], [r.json['body'] for r in received])
        self.assertEqual(3, len({r.peer for r in received}))

    def test_credentials_in_the_url_are_sent(self):
        url = self.receiver.url(self.path).replace('http://',
                                                   'http://user:p%40ss@')
        self.task.execute(subscription(url), [{'body': 1}])
        [request] = self.receiver.wait_for(1, self.path)
        self.assertEqual('Basic dXNlcjpwQHNz',
                         request.headers['Authorization'])

    def test_post_data_and_post_headers(self):
        self.task.execute(subscription(
            self.receiver.url(self.path),
            post_data='{"wrapped": "$zaqar_message$", "v": 1}',
            post_headers={'X-Token': 'abc'}), [{'body': 'x'}])
        [request] = self.receiver.wait_for(1, self.path)
        self.assertEqual({'wrapped': {'body': 'x', 'queue_name': 'orders'},
                          'v': 1}, request.json)
        self.assertEqual('abc', request.headers['X-Token'])

    def test_server_errors_are_retried_per_the_retry_policy(self):
        url = self.receiver.url('status/500/' + self.path)
        with self.assertLogs('zaqar_filtering.stages.webhook',
                             'WARNING') as logs:
            self.task.execute(subscription(url), [{'body': 1}],
                              queue_retry_policy=TWO_QUICK_RETRIES)
        self.assertEqual(3, len(logs.output))
        self.assertIn('got HTTP 500', logs.output[0])
        self.assertEqual(3, len(self.receiver.requests('status/500/'
                                                       + self.path)))

    def test_subscription_retry_policy_wins_unless_the_queue_forbids(self):
        url = self.receiver.url('status/503/' + self.path)
        one = dict(TWO_QUICK_RETRIES, retries_with_no_delay=1)
        forbid = dict(TWO_QUICK_RETRIES, ignore_subscription_override=True)
        with self.assertLogs('zaqar_filtering.stages.webhook', 'WARNING'):
            self.task.execute(subscription(url, _retry_policy=one),
                              [{'body': 1}],
                              queue_retry_policy=TWO_QUICK_RETRIES)
        self.assertEqual(2, len(self.receiver.requests('status/503/'
                                                       + self.path)))
        with self.assertLogs('zaqar_filtering.stages.webhook', 'WARNING'):
            self.task.execute(subscription(url, _retry_policy=one),
                              [{'body': 1}], queue_retry_policy=forbid)
        self.assertEqual(5, len(self.receiver.requests('status/503/'
                                                       + self.path)))

    def test_client_errors_are_not_retried(self):
        url = self.receiver.url('status/404/' + self.path)
        with self.assertLogs('zaqar_filtering.stages.webhook', 'WARNING'):
            self.task.execute(subscription(url), [{'body': 1}],
                              queue_retry_policy=TWO_QUICK_RETRIES)
        self.assertEqual(1, len(self.receiver.requests('status/404/'
                                                       + self.path)))

    def test_a_silent_server_times_out(self):
        silent = socket.socket()
        self.addCleanup(silent.close)
        silent.bind((base.HOST, 0))
        silent.listen(8)
        task = WebhookTask(timeout=0.2)
        started = time.monotonic()
        with self.assertLogs('zaqar_filtering.stages.webhook',
                             'WARNING') as logs:
            task.execute(subscription('http://%s:%d/' % silent.getsockname()),
                         [{'body': 1}], queue_retry_policy=TWO_QUICK_RETRIES)
        self.assertLess(time.monotonic() - started, 3)
        self.assertEqual(3, len(logs.output))
        self.assertIn('timed out', logs.output[0])


DELIVERING_CHILD = '''
import os, sys
from zaqar_filtering.stages import sender
webhooks = sender.ProcessSender(workers=2, timeout=2)
webhooks.send([{'id': 's', 'source': 'q', 'subscriber': sys.argv[1],
                'options': {}}], [{'body': 'from child'}], {})
print(webhooks.process.pid, flush=True)
sys.stdin.readline()
os._exit(0)
'''


class TestDeliveryProcess(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.receiver = base.WebhookReceiver().start()
        cls.addClassCleanup(cls.receiver.stop)

    def test_delivers_batches_and_stops_on_close(self):
        webhooks = sender.ProcessSender(workers=2, timeout=2)
        self.addCleanup(webhooks.close)
        webhooks.send([subscription(self.receiver.url('batch/%d' % i))
                       for i in range(3)], [{'body': 'a'}, {'body': 'b'}],
                      {})
        received = self.receiver.wait_for(6, 'batch')
        self.assertEqual({('/batch/%d' % i, body) for i in range(3)
                          for body in 'ab'},
                         {(r.path, r.json['body']) for r in received})
        self.assertTrue(webhooks.process.is_alive())
        webhooks.close()
        self.assertFalse(webhooks.process.is_alive())

    def test_exits_when_the_server_dies(self):
        child = subprocess.Popen(
            [sys.executable, '-c', textwrap.dedent(DELIVERING_CHILD),
             self.receiver.url('orphan')],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(child.stdout.close)
        self.addCleanup(child.wait, base.STOP_TIMEOUT)
        delivery_pid = int(child.stdout.readline())
        self.receiver.wait_for(1, 'orphan')
        child.stdin.write('\n')
        child.stdin.close()
        child.wait(base.STOP_TIMEOUT)
        deadline = time.monotonic() + sender.PARENT_CHECK_SECONDS + 3
        while _alive(delivery_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(_alive(delivery_pid))


def _echo(work, out, parent_pid):
    """A delivery process's stand-in: tells ``out`` what it got."""
    while True:
        item = work.get()
        if item is None:
            return
        out.put((os.getpid(), item))


class TestSeveralDeliveryProcesses(unittest.TestCase):

    def test_wake_reaches_each_and_work_goes_round(self):
        out = multiprocessing.get_context('spawn').Queue()
        processes = sender.DeliveryProcess(_echo, (out,), count=2)
        self.addCleanup(processes.close)
        processes.wake()
        woken = [out.get(timeout=60) for _ in range(2)]
        self.assertEqual(sorted(processes.pids), sorted(p for p, _ in woken))
        self.assertEqual(['wake', 'wake'], [item for _, item in woken])
        processes.put('a')
        processes.put('b')
        handed = dict(out.get(timeout=60) for _ in range(2))
        self.assertEqual(sorted(processes.pids), sorted(handed))
        self.assertEqual(['a', 'b'], sorted(handed.values()))
        processes.close()
        self.assertFalse(processes.is_alive())


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for all purposes; its parent (init) reaps it.
    with open('/proc/%d/stat' % pid) as stat:
        return stat.read().split(')')[-1].split()[0] != 'Z'
