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

"""A pooled deployment: the message store is a pool in Zaqar's catalog.

Zaqar runs the storage pipeline twice there (the pooled controllers', then
each pool's); each message must still reach each matching subscription
once.
"""

import time

import redis

from tests.functional import base
from tests.functional.test_notifier import FILTERING


class TestPooled(base.ServerTestCase):

    CONF_OVERRIDES = dict(FILTERING, DEFAULT={
        'auth_strategy': '', 'pooling': 'True', 'admin_mode': 'True',
        'debug': 'False'})

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        admin = base.Client(cls.zaqar.url)
        cls.addClassCleanup(admin.close)
        response = admin.put('/v2/pools/pool1', headers={'X-Roles': 'admin'},
                             json={'weight': 100,
                                   'uri': cls.redis.uri + '?dbid=1'})
        assert response.status_code == 201, response.text

    def test_each_match_is_delivered_once(self):
        self.assertEqual(201, self.client.create_queue(self.queue).status_code)
        for name, tags in (('A', ['apple']), ('B', ['xiaomi'])):
            response = self.client.subscribe(
                self.queue, self.receiver.url('%s/%s' % (self.queue, name)),
                {'filter_policies': tags})
            self.assertEqual(201, response.status_code, response.text)
        response = self.client.post_messages(self.queue, [
            {'ttl': 300, 'body': i, 'filter_policies': ['apple']}
            for i in range(3)])
        self.assertEqual(201, response.status_code, response.text)
        self.receiver.wait_for(3, self.queue + '/A')
        time.sleep(0.5)
        self.assertEqual([0, 1, 2], sorted(
            r.json['body'] for r in self.receiver.requests(self.queue)))
        pool = redis.Redis(host=base.HOST, port=self.redis.port, db=1)
        self.addCleanup(pool.close)
        # The pool's database, not the default one, holds the queue.
        self.assertTrue(pool.keys('*%s*' % self.queue))

    def test_invalid_policy_is_rejected(self):
        self.assertEqual(201, self.client.create_queue(self.queue).status_code)
        response = self.client.subscribe(self.queue, self.receiver.url('x'),
                                         {'binding_keys': ['a..b']})
        self.assertEqual(400, response.status_code)
        self.assertIn('has an empty word', response.json()['description'])
