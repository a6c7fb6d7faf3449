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

"""The ``openstack messaging subscription ...`` commands of our plugin.

The real ``openstack`` command of the virtualenv, without authentication
(``--os-auth-type none``), against a real zaqar-filtering-server.
"""

import json
import os
import subprocess

from tests.functional import base
from tests.functional.test_match import FILTERING
from tests.functional.test_match import MatchTestCase
from tests.functional.test_topics import TopicTestCase


class OpenStackCommand:
    """Runs the real ``openstack`` against the test's server."""

    def openstack(self, *args, project=None):
        """Run ``openstack``; return its exit status, stdout and stderr."""
        env = {key: value for key, value in os.environ.items()
               if not key.startswith('OS_')}
        done = subprocess.run(
            [base.venv_script('openstack'), '--os-auth-type', 'none',
             '--os-endpoint', self.zaqar.url,
             '--os-messaging-project-id', project or self.client.project]
            + list(args),
            capture_output=True, text=True, env=env, timeout=120)
        return done.returncode, done.stdout, done.stderr

    def openstack_json(self, *args, project=None):
        """Run ``openstack ... -f json``; return what it printed."""
        status, out, err = self.openstack(*args, '-f', 'json',
                                          project=project)
        self.assertEqual(0, status, err)
        return json.loads(out)


class TestOpenStackClient(OpenStackCommand, MatchTestCase):

    CONF_OVERRIDES = FILTERING

    def test_match_as_json_with_the_message_in_a_file(self):
        tagged = self.subscribe('tagged', {'filter_policies': ['xiaomi']})
        keyed = self.subscribe('keyed', {'binding_keys': ['audit.*']})
        everything = self.subscribe('all', {})
        path = os.path.join(self.workdir, self.queue + '.json')
        with open(path, 'w') as f:
            json.dump({'body': 1, 'filter_policies': ['apple'],
                       'routing_key': 'audit.eu'}, f)
        # One subscription a page: the command reads every page.
        status, out, err = self.openstack(
            'messaging', 'subscription', 'match', self.queue,
            '--message', '@' + path, '--page-size', '1', '-f', 'json')
        self.assertEqual(0, status, err)
        rows = {row['Subscription ID']: row for row in json.loads(out)}
        self.assertEqual({
            tagged: {'Subscription ID': tagged, 'Matched': False,
                     'Subscriber': self.receiver.url(self.queue + '/tagged'),
                     'Reason': "filter_policies: the message's tags [apple] "
                               "share none of [xiaomi]"},
            keyed: {'Subscription ID': keyed, 'Matched': True,
                    'Subscriber': self.receiver.url(self.queue + '/keyed'),
                    'Reason': ''},
            everything: {'Subscription ID': everything, 'Matched': True,
                         'Subscriber': self.receiver.url(self.queue + '/all'),
                         'Reason': ''},
        }, rows)
        self.assertEqual(0, self.client.total_messages(self.queue))

    def test_match_as_a_table_and_its_errors(self):
        self.subscribe('priced', {'filter_policy': {
            'price': [{'numeric': ['>', 200]}]}})
        status, out, err = self.openstack(
            'messaging', 'subscription', 'match', self.queue, '--message',
            '{"body": 1, "attributes": {"price": 150}}',
            '-c', 'Matched', '-c', 'Reason', '-f', 'table')
        self.assertEqual(0, status, err)
        self.assertIn('| False   | filter_policy: price 150 is not > 200 |',
                      out)

        status, out, err = self.openstack(
            'messaging', 'subscription', 'match', self.queue, '--message',
            '{"body": 1, "routing_key": "a..b"}')
        self.assertEqual(1, status, out)
        self.assertIn("400 Invalid API request: message: routing_key: "
                      "routing key 'a..b' has an empty word", err)

        status, out, err = self.openstack(
            'messaging', 'subscription', 'match', self.queue,
            '--message', '[1]')
        self.assertEqual(1, status, out)
        self.assertIn('--message: must be a JSON object such as '
                      '{"body": ...}, not list', err)

    def test_deliveries(self):
        sub_id = self.subscribe('counted', {})
        response = self.client.post_messages(self.queue, [{'body': 1}])
        self.assertEqual(201, response.status_code, response.text)
        self.receiver.wait_for(1, self.queue + '/counted')

        def delivered():
            status, out, err = self.openstack(
                'messaging', 'subscription', 'deliveries', self.queue,
                sub_id, '-f', 'json')
            self.assertEqual(0, status, err)
            return json.loads(out)
        base.wait_until(lambda: delivered()['Delivered'] == 1, timeout=60)
        stats = delivered()
        self.assertEqual({'Subscription ID': sub_id, 'Pending': 0,
                          'Subscriber': self.receiver.url(
                              self.queue + '/counted')},
                         {key: stats[key] for key in (
                             'Subscription ID', 'Pending', 'Subscriber')})

        # Another project sees no such subscription.
        status, out, err = self.openstack(
            'messaging', 'subscription', 'deliveries', self.queue, sub_id,
            project='another-project')
        self.assertEqual(1, status, out)
        self.assertIn('404 Not found: Subscription %s does not exist'
                      % sub_id, err)


class TestTopicCommands(OpenStackCommand, TopicTestCase):
    """``openstack messaging topic ...`` on topics with queue subscribers."""

    def topic_command(self, *args, project=None):
        return self.openstack_json('messaging', 'topic', *args,
                                   project=project)

    def test_a_topic_fans_out_to_a_queue_and_a_webhook(self):
        shown = self.topic_command(
            'create', self.topic, '--metadata',
            '{"_retry_policy": {"notify_strategy": "backoff"}}')
        self.assertEqual({'Name': self.topic, 'Metadata': {
            '_retry_policy': {'notify_strategy': 'backoff'}}}, shown)
        self.assertIn({'Name': self.topic},
                      self.topic_command('list', '--page-size', '1'))
        self.assertIn(shown, self.topic_command('list', '--detailed'))
        self.assertEqual(shown, self.topic_command('show', self.topic))

        placed = self.name('placed')
        self.assertEqual(201, self.client.create_queue(placed).status_code)
        to_queue = self.topic_command(
            'subscription', 'create', self.topic, 'queue:' + placed, '3600',
            '--options', '{"filter_policies": ["order_placed"]}')
        self.assertEqual(('queue:' + placed, 3600,
                          {'filter_policies': ['order_placed']}),
                         (to_queue['Subscriber'], to_queue['TTL'],
                          to_queue['Options']))
        options = os.path.join(self.workdir, self.topic + '.json')
        with open(options, 'w') as f:
            json.dump({'binding_keys': ['order.#']}, f)
        hook = self.receiver.url(self.topic + '/big')
        to_hook = self.topic_command(
            'subscription', 'create', self.topic, hook, '3600',
            '--options', '@' + options)
        updated = self.topic_command(
            'subscription', 'update', self.topic, to_hook['ID'], '--options',
            '{"filter_policy": {"amount": [{"numeric": [">", 100]}]}}')
        self.assertEqual(
            {'filter_policy': {'amount': [{'numeric': ['>', 100]}]}},
            updated['Options'])
        self.assertEqual(
            {to_queue['ID']: 'queue:' + placed, to_hook['ID']: hook},
            {row['ID']: row['Subscriber'] for row in self.topic_command(
                'subscription', 'list', self.topic, '--page-size', '1')})

        message = {'body': {'id': 1}, 'ttl': 300,
                   'filter_policies': ['order_placed'],
                   'attributes': {'amount': 50}}
        rows = self.topic_command('subscription', 'match', self.topic,
                                  '--message', json.dumps(message))
        self.assertEqual(
            {to_queue['ID']: (True, ''),
             to_hook['ID']: (False, 'filter_policy: amount 50 is not > 100')},
            {row['Subscription ID']: (row['Matched'], row['Reason'])
             for row in rows})

        published = self.topic_command(
            'publish', self.topic, '--message', json.dumps(message),
            '--message', '{"body": {"id": 2}, "attributes": {"amount": 500}}')
        self.assertEqual({'Topic': self.topic, 'Published': 2}, published)
        base.wait_until(lambda: self.client.total_messages(placed) == 1)
        self.assertEqual([{'id': 1}], self.claim_all(placed))
        [request] = self.receiver.wait_for(1, self.topic + '/big')
        self.assertEqual({'id': 2}, request.json['body'])

        def stats():
            return self.topic_command('stats', self.topic)
        base.wait_until(lambda: stats()['Delivered'] == 2)
        self.assertEqual({'Retained': 0, 'Retrying': 0, 'Delivered': 2,
                          'Dropped': 0, 'Expired': 0, 'Total': 0}, stats())
        deliveries = self.topic_command('subscription', 'deliveries',
                                        self.topic, to_queue['ID'])
        self.assertEqual((1, 0), (deliveries['Delivered'],
                                  deliveries['Pending']))

        status, out, err = self.openstack(
            'messaging', 'topic', 'subscription', 'delete', self.topic,
            to_hook['ID'])
        self.assertEqual((0, ''), (status, out), err)
        status, out, err = self.openstack(
            'messaging', 'topic', 'delete', self.topic)
        self.assertEqual((0, ''), (status, out), err)
        status, out, err = self.openstack('messaging', 'topic', 'show',
                                          self.topic)
        self.assertEqual(1, status, out)
        self.assertIn('404 Not found: ', err)

    def test_errors_name_the_cause(self):
        self.client.put('/v2/topics/%s' % self.topic)
        cases = [
            (('subscription', 'create', self.topic, 'queue:', '3600'),
             '400 Invalid API request: ', 'names no queue'),
            (('subscription', 'create', self.topic,
              self.receiver.url('x'), '3600', '--options', '["a"]'),
             '--options: must be a JSON object such as '
             '{"filter_policies": ["tag"]}, not list', ''),
            (('subscription', 'update', self.topic, 'an-id'),
             'Nothing to change: give --subscriber, --ttl or --options', ''),
            (('publish', self.topic, '--message', '{"body": 1, '
              '"routing_key": "a..b"}'),
             '400 Invalid API request: ', "routing key 'a..b' has an empty "
             "word"),
            (('publish', self.topic, '--message', '@/nonexistent.json'),
             '--message: cannot read /nonexistent.json: No such file or '
             'directory', ''),
            (('create', self.topic, '--metadata',
              '{"_default_message_ttl": "x"}'), '400 ', ''),
            (('delete', self.topic, self.name('gone')), '', ''),
        ]
        for args, first, second in cases:
            status, out, err = self.openstack('messaging', 'topic', *args)
            if args[0] == 'delete':
                # Deleting a topic that does not exist succeeds, as in Zaqar.
                self.assertEqual(0, status, err)
                continue
            self.assertEqual(1, status, (args, out))
            self.assertIn(first, err, args)
            self.assertIn(second, err, args)

        # Another project sees no topic of this one.
        status, out, err = self.openstack('messaging', 'topic', 'stats',
                                          self.topic, project='another')
        self.assertEqual(1, status, out)
        self.assertIn('404 Not found: ', err)
        self.assertNotIn({'Name': self.topic}, self.topic_command(
            'list', project='another'))
