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


class TestOpenStackClient(MatchTestCase):

    CONF_OVERRIDES = FILTERING

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
