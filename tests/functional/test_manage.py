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

"""The operator commands on Zaqar's real redis stores, as console scripts.

Zaqar's management store is redis here too, whose queue listing repeats
its page for a project with one queue: every command must still end
(each runs under a timeout, so a regression fails instead of hanging),
and its exit status says whether something needs attention.
"""

import json
import subprocess

from tests.functional import base
from tests.functional.test_notifier import FILTERING

#: Seconds a command may take; they take about two.
COMMAND_TIMEOUT = 60


class RedisManagementTestCase(base.ServerTestCase):
    """Zaqar on redis only; the filtering stages with the embedded store."""

    CONF_OVERRIDES = {
        **FILTERING,
        'drivers': {'management_store': 'redis'},
        'drivers:management_store:redis': {'uri': '{redis}'},
    }
    PROJECT = 'zaqar-filtering-tests'

    @classmethod
    def start_zaqar(cls, overrides=None, name='zaqar'):
        # The management store's redis is the class's own, known only now.
        overrides = {section: {key: value.replace('{redis}', cls.redis.uri)
                               for key, value in options.items()}
                     for section, options in (overrides or {}).items()}
        return super().start_zaqar(overrides, name)

    def run_script(self, name, *args):
        try:
            return subprocess.run(
                [base.venv_script(name), '--config-file',
                 self.zaqar.conf_path] + list(args),
                capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            self.fail('%s %s did not end within %d s: %s'
                      % (name, ' '.join(args), COMMAND_TIMEOUT, exc.stderr))

    def one_queue_one_subscription(self, options):
        self.assertEqual(201, self.client.create_queue(self.queue).status_code)
        response = self.client.subscribe(self.queue, self.receiver.url('a'),
                                         options)
        self.assertEqual(201, response.status_code, response.text)
        return response.json()['subscription_id']


class TestOneQueue(RedisManagementTestCase):

    def test_sync_verify_and_export_end(self):
        sub_id = self.one_queue_one_subscription({'filter_policies': ['t']})
        for args in (('sync', '--all'), ('sync', '--project', self.PROJECT),
                     ('verify', '--all'),
                     ('verify', '--project', self.PROJECT)):
            result = self.run_script('zaqar-filtering-manage', *args)
            self.assertEqual(0, result.returncode,
                             result.stdout + result.stderr)
        self.assertIn('1 subscriptions checked: 0 invalid', result.stdout)
        result = self.run_script('zaqar-filtering-export')
        self.assertEqual(0, result.returncode, result.stderr)
        exported = [json.loads(line) for line in result.stdout.splitlines()]
        self.assertEqual([sub_id], [sub['id'] for sub in exported
                                    if sub['source'] == self.queue])


class TestInvalidPolicies(RedisManagementTestCase):
    """A class of its own: --all would see its invalid subscription."""

    def test_need_attention_under_the_embedded_store(self):
        self.one_queue_one_subscription({})
        self.redis.seed_subscriptions(self.PROJECT, self.queue, [
            (self.receiver.url('bad'), {'filter_policies': 'not a list'})])
        result = self.run_script('zaqar-filtering-manage', 'verify',
                                 '--project', self.PROJECT)
        self.assertEqual(1, result.returncode, result.stdout + result.stderr)
        self.assertIn('invalid project=%s queue=%s subscription='
                      % (self.PROJECT, self.queue), result.stdout)
        self.assertIn('filter_policies: ', result.stdout)
        self.assertIn('2 subscriptions checked: 1 invalid', result.stdout)
        result = self.run_script('zaqar-filtering-manage', 'sync',
                                 '--project', self.PROJECT)
        self.assertEqual(1, result.returncode, result.stdout + result.stderr)
        self.assertIn('  invalid ', result.stdout)


class TestTopics(RedisManagementTestCase):
    """Topic subscriptions (source ``topic:NAME``) are seen by every tool."""

    def topic_subscription(self, client, topic, options):
        self.assertEqual(201, client.put('/v2/topics/%s' % topic).status_code)
        response = client.post('/v2/topics/%s/subscriptions' % topic, json={
            'subscriber': self.receiver.url(topic), 'ttl': 3600,
            'options': options})
        self.assertEqual(201, response.status_code, response.text)
        return response.json()['subscription_id']

    def test_topics_are_synced_verified_exported_and_counted(self):
        topic = 't' + self.queue[1:]
        sub_id = self.topic_subscription(self.client, topic,
                                         {'binding_keys': ['order.#']})
        # A project with a topic and no queue at all.
        alone = base.Client(self.zaqar.url, project='topics-only')
        self.addCleanup(alone.close)
        alone_id = self.topic_subscription(alone, topic, {})

        result = self.run_script('zaqar-filtering-manage', 'sync', '--all')
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)
        self.assertIn('topic:%s ' % topic, result.stdout)
        result = self.run_script('zaqar-filtering-manage', 'verify', '--all')
        self.assertEqual(0, result.returncode, result.stdout + result.stderr)
        self.assertIn('2 subscriptions checked: 0 invalid', result.stdout)

        result = self.run_script('zaqar-filtering-export')
        self.assertEqual(0, result.returncode, result.stderr)
        exported = {sub['id']: (sub['project'], sub['source'])
                    for sub in map(json.loads, result.stdout.splitlines())}
        self.assertEqual({sub_id: (self.PROJECT, 'topic:' + topic),
                          alone_id: ('topics-only', 'topic:' + topic)},
                         exported)

        # Delivered through the ledger: counted under the topic.
        response = self.client.post('/v2/topics/%s/messages' % topic, json={
            'messages': [{'body': 1, 'routing_key': 'order.placed'}]})
        self.assertEqual(201, response.status_code, response.text)
        self.receiver.wait_for(1, topic)

        def deliveries():
            result = self.run_script(
                'zaqar-filtering-manage', 'deliveries', '--project',
                self.PROJECT, '--topic', topic)
            self.assertEqual(0, result.returncode, result.stderr)
            return result.stdout.splitlines()
        base.wait_until(lambda: len(deliveries()) == 3
                        and deliveries()[1].split()[5] == '1')
        self.assertEqual([self.PROJECT, 'topic:' + topic, sub_id, '0', '0',
                          '1', '0', '0', '-'], deliveries()[1].split())

    def test_an_invalid_topic_policy_needs_attention(self):
        topic = 't' + self.queue[1:]
        self.topic_subscription(self.client, topic, {})
        # Deleting the topic deletes the invalid subscription too, which
        # the other test's --all must not see.
        self.addCleanup(self.client.delete, '/v2/topics/%s' % topic)
        self.redis.seed_subscriptions(self.PROJECT, 'topic:' + topic, [
            (self.receiver.url('bad'), {'binding_keys': 'not a list'})])
        result = self.run_script('zaqar-filtering-manage', 'verify',
                                 '--project', self.PROJECT, '--topic', topic)
        self.assertEqual(1, result.returncode, result.stdout + result.stderr)
        self.assertIn('invalid project=%s topic=%s subscription='
                      % (self.PROJECT, topic), result.stdout)
        self.assertIn('2 subscriptions checked: 1 invalid', result.stdout)
        result = self.run_script('zaqar-filtering-manage', 'verify',
                                 '--project', self.PROJECT, '--topic', topic,
                                 '--queue', self.queue)
        self.assertEqual(2, result.returncode, result.stdout)
        self.assertIn('not allowed with argument', result.stderr)
