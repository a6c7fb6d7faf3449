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

"""The dry run: who would receive a message, and why the others not."""

from tempest.lib import decorators

from zaqar_filtering_tempest_plugin.tests import base

SUBSCRIBER = 'http://127.0.0.1:9/match'

MESSAGE = {'body': {'order': {'total': 12}}, 'ttl': 300,
           'filter_policies': ['apple', 'imac'], 'routing_key': 'audit.eu',
           'attributes': {'price': 150}}


class TestMatchSubscriptions(base.BaseFilteringTest):

    def setUp(self):
        super().setUp()
        self.queue_name = self.create_test_queue()

    @decorators.idempotent_id('6d2f4a81-0c3b-4e57-9a16-8b4e2f7c5d01')
    def test_every_policy_kind_is_explained(self):
        ids = {
            'tags': self.subscribe(self.queue_name, SUBSCRIBER + '/tags',
                                   {'filter_policies': ['xiaomi']}),
            'keys': self.subscribe(self.queue_name, SUBSCRIBER + '/keys',
                                   {'binding_keys': ['order.#']}),
            'price': self.subscribe(self.queue_name, SUBSCRIBER + '/price', {
                'filter_policy': {'price': [{'numeric': ['>', 200]}]}}),
            'body': self.subscribe(self.queue_name, SUBSCRIBER + '/body', {
                'filter_policy': {'order': {'total': [
                    {'numeric': ['>', 99]}]}},
                'filter_policy_scope': 'MessageBody'}),
            'all': self.subscribe(self.queue_name, SUBSCRIBER + '/all', {}),
            'imac': self.subscribe(self.queue_name, SUBSCRIBER + '/imac',
                                   {'filter_policies': ['imac']}),
        }
        _, body = self.client.match_subscriptions(self.queue_name, MESSAGE)
        self.assertEqual(
            sorted([ids['all'], ids['imac']]),
            sorted(entry['subscription_id'] for entry in body['matched']))
        reasons = {entry['subscription_id']: entry['reason']
                   for entry in body['not_matched']}
        self.assertEqual({
            ids['tags']: "filter_policies: the message's tags [apple, imac] "
                         "share none of [xiaomi]",
            ids['keys']: "binding_keys: routing key 'audit.eu' matches none "
                         "of [order.#]",
            ids['price']: 'filter_policy: price 150 is not > 200',
            ids['body']: 'filter_policy: order.total 12 is not > 99',
        }, reasons)
        # A dry run stores nothing.
        self.assertEqual(0, self.client.total_messages(self.queue_name))

    @decorators.idempotent_id('a91c5e37-4f2d-4b08-8c63-1e7d9b0f6a12')
    def test_paging(self):
        ids = {self.subscribe(self.queue_name, '%s/%d' % (SUBSCRIBER, i))
               for i in range(3)}
        seen = []
        _, body = self.client.match_subscriptions(
            self.queue_name, {'body': 1}, limit=2)
        while body['matched']:
            self.assertLessEqual(len(body['matched']), 2)
            seen += [entry['subscription_id'] for entry in body['matched']]
            _, body = self.client.match_subscriptions(
                self.queue_name, {'body': 1},
                href=body['links'][0]['href'])
        self.assertEqual(ids, set(seen))
        self.assertEqual(len(ids), len(seen))

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('c3e7a0f4-8b16-4d29-b5f1-2a9c6e3d7b23')
    def test_invalid_message_is_rejected_as_a_post_is(self):
        description = self.assertBadRequest(
            "message: filter_policies: tag 'abcdefghijklmnopq' has 17 "
            "characters; the limit is 16",
            self.client.match_subscriptions, self.queue_name,
            {'body': 1, 'filter_policies': ['abcdefghijklmnopq']})
        self.assertTrue(description.startswith('message: '))
        self.assertBadRequest(
            'Missing "body" field.', self.client.match_subscriptions,
            self.queue_name, {'ttl': 300})
