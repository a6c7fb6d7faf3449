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

"""Durable webhook retries with CMQ's notify strategies, against a real
zaqar-filtering-server, its redis and receivers that fail on purpose.

The intervals are shortened through ``[filtering:delivery]``: backoff
retries after 0.2 to 0.4 s, exponential decay after 0.2, 0.4, 0.8, 0.8 ...
"""

import collections
import socket
import subprocess
import time

from tests.functional import base

FAST = {
    'storage': {'message_pipeline': 'zaqar_filtering.notifier',
                'subscription_pipeline': 'zaqar_filtering.validation'},
    'filtering': {'delivery_timeout_seconds': '1'},
    'filtering:delivery': {
        'backoff_min_seconds': '0.2', 'backoff_max_seconds': '0.4',
        'decay_first_seconds': '0.2', 'decay_max_seconds': '0.8',
        'lease_seconds': '5', 'poll_seconds': '0.1', 'report_seconds': '1',
    },
}
BACKOFF = {'_retry_policy': {'notify_strategy': 'backoff'}}


def overrides(**extra):
    found = {group: dict(options) for group, options in FAST.items()}
    for group, options in extra.items():
        found.setdefault(group, {}).update(options)
    return found


def numbers(requests):
    return [r.json['body']['n'] for r in requests]


def messages(first, count):
    return [{'body': {'n': n}, 'ttl': 3600}
            for n in range(first, first + count)]


class RetryTestCase(base.ServerTestCase):
    CONF_OVERRIDES = overrides()

    def subscribe(self, path, options=None, client=None):
        response = (client or self.client).subscribe(
            self.queue, self.receiver.url(path), options)
        self.assertEqual(201, response.status_code, response.text)
        return response.json()['subscription_id']

    def post(self, first, count, client=None):
        client = client or self.client
        for start in range(first, first + count, 10):
            response = client.post_messages(
                self.queue, messages(start, min(10, first + count - start)))
            self.assertEqual(201, response.status_code, response.text)

    def deliveries(self, sub_id, client=None):
        response = (client or self.client).get(
            '/v2/queues/%s/subscriptions/%s/deliveries' % (self.queue,
                                                           sub_id))
        self.assertEqual(200, response.status_code, response.text)
        return response.json()

    def wait_recorded(self, sub_id):
        """Wait until nothing is pending for the subscription.

        The delivery process records an outcome a moment after the answer
        that the receiver saw.
        """
        base.wait_until(lambda: self.deliveries(sub_id)['pending'] == 0)

    def delivered_once(self, path, count, timeout=base.WAIT_TIMEOUT):
        """Wait for ``count`` 2xx deliveries; each message got one."""
        ok = self.receiver.wait_for(count, path, timeout, status=200)
        time.sleep(0.5)
        ok = self.receiver.requests(path, status=200)
        self.assertEqual([], [n for n, times in
                              collections.Counter(numbers(ok)).items()
                              if times > 1], 'delivered twice')
        self.assertEqual(count, len(ok))
        return ok


class TestRetries(RetryTestCase):

    def test_success_after_failures_is_delivered_exactly_once(self):
        path = self.queue + '/flaky'
        sub_id = self.subscribe(path)
        self.receiver.fail(path, status=500)
        self.post(0, 5)
        self.receiver.wait_for(10, path, status=500)
        self.receiver.recover(path)
        self.delivered_once(path, 5)
        self.wait_recorded(sub_id)
        stats = self.deliveries(sub_id)
        self.assertEqual((0, 0, 5), (stats['pending'], stats['retrying'],
                                     stats['delivered']))
        self.assertEqual('HTTP 500', stats['last_error'])
        self.assertIn('T', stats['last_error_at'])

    def test_4xx_answers_are_failures_too(self):
        path = self.queue + '/gone'
        sub_id = self.subscribe(path)
        self.receiver.fail(path, status=404)
        self.post(0, 1)
        self.receiver.wait_for(2, path, status=404)
        stats = self.deliveries(sub_id)
        self.assertEqual((1, 1, 'HTTP 404'), (stats['pending'],
                                              stats['retrying'],
                                              stats['last_error']))
        self.receiver.recover(path)
        self.delivered_once(path, 1)

    def test_backoff_drops_after_three_retries_and_keeps_order(self):
        path = self.queue + '/backoff'
        sub_id = self.subscribe(path, BACKOFF)
        self.receiver.fail(path, when=lambda body: body['body']['n'] == 0)
        self.post(0, 4)
        ok = self.receiver.wait_for(3, path, status=200)
        everything = self.receiver.requests(path)
        # One attempt and three retries of message 0, then the others, one
        # at a time, in order.
        self.assertEqual([0, 0, 0, 0, 1, 2, 3], numbers(everything))
        self.assertEqual([1, 2, 3], numbers(ok))
        gaps = [b.time - a.time for a, b in zip(everything, everything[1:4])]
        self.assertTrue(all(0.2 <= gap < 1.5 for gap in gaps), gaps)
        self.wait_recorded(sub_id)
        stats = self.deliveries(sub_id)
        self.assertEqual((1, 3), (stats['dropped'], stats['delivered']))

    def test_exponential_decay_blocks_after_a_failed_retry(self):
        path = self.queue + '/decay'
        sub_id = self.subscribe(path)
        self.receiver.fail(path, when=lambda body: body['body']['n'] == 0)
        self.post(0, 1)
        # The first attempt and a retry failed (the third attempt shows
        # that the second was recorded): later messages wait.
        self.receiver.wait_for(3, path, status=500)
        self.post(1, 3)
        self.receiver.wait_for(5, path, status=500)
        self.assertEqual([], self.receiver.requests(path, status=200))
        stats = self.deliveries(sub_id)
        self.assertEqual(4, stats['pending'])
        self.receiver.recover(path)
        ok = self.delivered_once(path, 4)
        self.assertEqual(0, numbers(ok)[0])
        self.assertEqual({1, 2, 3}, set(numbers(ok)[1:]))
        failed = self.receiver.requests(path, status=500)
        gaps = [b.time - a.time for a, b in zip(failed, failed[1:])]
        self.assertTrue(all(gap >= 0.2 for gap in gaps), gaps)
        self.wait_recorded(sub_id)

    def test_timeouts_and_a_closed_port_are_retried(self):
        slow = self.queue + '/slow'
        slow_id = self.subscribe(slow)
        self.receiver.fail(slow, status=200, delay=1.5)
        with socket.socket() as sock:
            sock.bind((base.HOST, 0))
            closed = 'http://%s:%d/' % (base.HOST, sock.getsockname()[1])
        response = self.client.subscribe(self.queue, closed)
        closed_id = response.json()['subscription_id']
        self.post(0, 1)
        self.receiver.wait_for(2, slow)
        self.receiver.recover(slow)
        base.wait_until(
            lambda: self.deliveries(closed_id)['retrying'] == 1)
        self.assertIn('ConnectionRefusedError',
                      self.deliveries(closed_id)['last_error'])
        self.assertIn('timed out', self.deliveries(slow_id)['last_error'])
        base.wait_until(
            lambda: self.deliveries(slow_id)['delivered'] == 1)

    def test_a_deleted_subscription_drops_its_retries(self):
        path = self.queue + '/deleted'
        sub_id = self.subscribe(path)
        self.receiver.fail(path)
        self.post(0, 2)
        self.receiver.wait_for(4, path)
        response = self.client.delete('/v2/queues/%s/subscriptions/%s'
                                      % (self.queue, sub_id))
        self.assertEqual(204, response.status_code)
        # What was out when it went may still arrive; nothing after.
        time.sleep(0.5)
        seen = len(self.receiver.requests(path))
        time.sleep(1.5)
        self.assertEqual(seen, len(self.receiver.requests(path)))

    def test_invalid_notify_strategy_is_a_400(self):
        response = self.client.subscribe(
            self.queue, self.receiver.url(self.queue),
            {'_retry_policy': {'notify_strategy': 'forever'}})
        self.assertEqual(400, response.status_code)
        self.assertIn('_retry_policy/notify_strategy', response.text)
        self.assertIn('backoff, exponential_decay', response.text)
        mixed = self.client.subscribe(
            self.queue, self.receiver.url(self.queue),
            {'_retry_policy': {'notify_strategy': 'backoff',
                               'retries_with_no_delay': 2}})
        self.assertEqual(400, mixed.status_code)
        self.assertIn('retries_with_no_delay', mixed.text)

    def test_the_queue_policy_wins_with_ignore_subscription_override(self):
        response = self.client.create_queue(self.queue, {
            '_retry_policy': {'notify_strategy': 'backoff',
                              'ignore_subscription_override': True}})
        self.assertEqual(201, response.status_code, response.text)
        path = self.queue + '/override'
        # The subscription asks for exponential decay; the queue wins.
        self.subscribe(path, {'_retry_policy': {
            'notify_strategy': 'exponential_decay'}})
        self.receiver.fail(path)
        self.post(0, 1)
        self.receiver.wait_for(4, path)
        time.sleep(1.5)
        self.assertEqual(4, len(self.receiver.requests(path)))

    def test_manage_deliveries_shows_pending_and_last_error(self):
        path = self.queue + '/down'
        sub_id = self.subscribe(path)
        self.receiver.fail(path, status=503)
        self.post(0, 3)
        base.wait_until(lambda: self.deliveries(sub_id)['retrying'] == 3)
        result = subprocess.run(
            [base.venv_script('zaqar-filtering-manage'), '--config-file',
             self.zaqar.conf_path, 'deliveries', '--project',
             self.client.project, '--queue', self.queue],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(0, result.returncode, result.stderr)
        [row] = [line.split() for line in result.stdout.splitlines()
                 if sub_id in line]
        self.assertEqual([self.client.project, self.queue, sub_id, '3', '3',
                          '0', '0', '0', 'HTTP', '503', 'at'], row[:11])
        self.assertIn('1 subscriptions, 3 deliveries pending, 3 retrying',
                      result.stdout)
        self.receiver.recover(path)
        self.delivered_once(path, 3)

    def test_unknown_subscription_deliveries_are_404(self):
        response = self.client.get(
            '/v2/queues/%s/subscriptions/%s/deliveries'
            % (self.queue, '0' * 24))
        self.assertEqual(404, response.status_code)


class TestLifecycle(RetryTestCase):
    CONF_OVERRIDES = overrides(**{'filtering:delivery': {
        'lifecycle_seconds': '1.5'}})

    def test_deliveries_are_dropped_when_the_lifecycle_ends(self):
        path = self.queue + '/down'
        sub_id = self.subscribe(path)
        self.receiver.fail(path)
        self.post(0, 2)
        base.wait_until(lambda: self.deliveries(sub_id)['expired'] == 2)
        stats = self.deliveries(sub_id)
        self.assertEqual((0, 0, 0), (stats['pending'], stats['retrying'],
                                     stats['delivered']))
        seen = len(self.receiver.requests(path))
        # Retries never extend it: 0.2 + 0.4 + 0.8 s fit in 1.5 s.
        self.assertLessEqual(seen, 8)
        self.receiver.recover(path)
        time.sleep(1)
        self.assertEqual(seen, len(self.receiver.requests(path)))


class TestScenario4(RetryTestCase):
    """CMQ's scenario 4 against a real server and receivers.

    A fails 100 of 200 and recovers, B fails 30, C gets all 200 once; the
    server restarts while A and B are retrying.
    """

    def test_scenario_4(self):
        paths = {name: '%s/%s' % (self.queue, name) for name in 'ABC'}
        ids = {name: self.subscribe(path) for name, path in paths.items()}
        self.receiver.fail(paths['A'],
                           when=lambda body: body['body']['n'] >= 100)
        self.receiver.fail(paths['B'],
                           when=lambda body: body['body']['n'] % 5 == 0
                           and body['body']['n'] < 150)
        self.post(0, 200)
        self.delivered_once(paths['C'], 200)
        self.receiver.wait_for(100, paths['A'], status=200)
        self.receiver.wait_for(100, paths['A'], status=500)
        self.receiver.wait_for(30, paths['B'], status=500)
        pending = {name: self.deliveries(ids[name])['pending']
                   for name in 'AB'}
        self.assertEqual(100, pending['A'])
        self.assertEqual(30, pending['B'])

        # A restart loses no pending retry.
        self.zaqar.stop()
        self.zaqar.start()
        self.receiver.recover(paths['A'])
        self.receiver.recover(paths['B'])
        self.delivered_once(paths['A'], 200, timeout=30)
        self.delivered_once(paths['B'], 200, timeout=30)
        for name in 'ABC':
            self.wait_recorded(ids[name])
            stats = self.deliveries(ids[name])
            self.assertEqual((0, 0, 200, 0, 0),
                             (stats['pending'], stats['retrying'],
                              stats['delivered'], stats['dropped'],
                              stats['expired']), name)
        self.assertEqual(200, len(self.receiver.requests(paths['C'])))


class TestTwoServers(RetryTestCase):
    """Two servers, so two delivery processes, share one ledger."""

    def test_each_delivery_is_posted_by_one_of_them(self):
        other = self.start_zaqar(self.CONF_OVERRIDES, name='second')
        other_client = base.Client(other.url)
        self.addCleanup(other_client.close)
        paths = {name: '%s/%s' % (self.queue, name) for name in 'AB'}
        for path in paths.values():
            self.subscribe(path)
        # A fails its first attempts at even messages, so that retries of
        # both servers' posts are due while both processes claim.
        failed = set()

        def first_time_even(body):
            n = body['body']['n']
            if n % 2 or n in failed:
                return False
            failed.add(n)
            return True

        self.receiver.fail(paths['A'], when=first_time_even)
        self.post(0, 50)
        self.post(50, 50, client=other_client)
        for path in paths.values():
            self.delivered_once(path, 100)
        self.assertEqual(50, len(self.receiver.requests(paths['A'],
                                                        status=500)))
