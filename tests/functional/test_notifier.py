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

"""The filtering notifier and validation stages in a real Zaqar server.

A real zaqar-filtering-server with its redis store delivers to a real
webhook receiver: each test checks who received which messages.
"""

import time

from tests.functional import base

FILTERING = {'storage': {
    'message_pipeline': 'zaqar_filtering.notifier',
    'subscription_pipeline': 'zaqar_filtering.validation'}}
SCENARIO_TAGS = ['apple', 'imac', 'iphone', 'macbook']
# Long enough for a delivery that should not happen to show up.
GRACE = 0.5


class TestFilteredDelivery(base.ServerTestCase):

    CONF_OVERRIDES = FILTERING

    def setUp(self):
        super().setUp()
        self.assertEqual(201, self.client.create_queue(self.queue).status_code)

    def subscribe(self, name, options):
        response = self.client.subscribe(
            self.queue, self.receiver.url('%s/%s' % (self.queue, name)),
            options)
        self.assertEqual(201, response.status_code, response.text)
        return response.json()['subscription_id']

    def post(self, messages):
        for start in range(0, len(messages), 10):
            response = self.client.post_messages(
                self.queue, messages[start:start + 10])
            self.assertEqual(201, response.status_code, response.text)

    def receipts(self, names, expected):
        """Wait for the expected deliveries; return the bodies per name."""
        for name, count in expected.items():
            if count:
                self.receiver.wait_for(count, '%s/%s' % (self.queue, name))
        time.sleep(GRACE)
        return {name: [r.json['body'] for r in self.receiver.requests(
            '%s/%s' % (self.queue, name))] for name in names}

    def test_seed_scenario_1_and_an_untagged_message(self):
        for name, tags in (('A', ['apple']), ('B', ['xiaomi']),
                           ('C', ['imac', 'xiaomi']), ('D', None)):
            self.subscribe(name, {'filter_policies': tags} if tags else {})
        self.post([{'ttl': 300, 'body': i, 'filter_policies': SCENARIO_TAGS}
                   for i in range(100)] + [{'ttl': 300, 'body': 'untagged'}])
        received = self.receipts('ABCD', {'A': 100, 'C': 100, 'D': 101})
        self.assertEqual({'A': 100, 'B': 0, 'C': 100, 'D': 101},
                         {name: len(bodies)
                          for name, bodies in received.items()})
        self.assertEqual(set(range(100)), set(received['A']))
        self.assertNotIn('untagged', received['C'])

    def test_seed_scenario_3_unmatched_messages_are_stored_not_pushed(self):
        self.subscribe('A', {'filter_policies': ['xiaomi']})
        self.post([{'ttl': 300, 'body': i, 'filter_policies': SCENARIO_TAGS}
                   for i in range(20)])
        self.assertEqual({'A': []}, self.receipts('A', {}))
        self.assertEqual(20, self.client.total_messages(self.queue))

    def test_binding_keys(self):
        self.subscribe('star', {'binding_keys': ['1.*.0']})
        self.subscribe('hash', {'binding_keys': ['1.#.0']})
        self.subscribe('all', {'binding_keys': ['#']})
        self.post([{'ttl': 300, 'body': key, 'routing_key': key}
                   for key in ('1.x.0', '1.0', '1.2.3.4.4.2.2.0', '2.0')]
                  + [{'ttl': 300, 'body': 'no key'}])
        received = self.receipts(['star', 'hash', 'all'],
                                 {'star': 1, 'hash': 3, 'all': 4})
        self.assertEqual(['1.x.0'], received['star'])
        self.assertEqual({'1.x.0', '1.0', '1.2.3.4.4.2.2.0'},
                         set(received['hash']))
        self.assertEqual(4, len(received['all']))

    def test_filter_policies_in_both_scopes(self):
        self.subscribe('attrs', {'filter_policy': {
            'price': [{'numeric': ['>', 100]}],
            'store': ['example_corp']}})
        self.subscribe('body', {
            'filter_policy_scope': 'MessageBody',
            'filter_policy': {'order': {'total': [{'numeric': ['>=', 10]}],
                                        'state': [{'anything-but': 'void'}]}}})
        self.post([
            {'ttl': 300, 'body': 'cheap', 'attributes': {
                'price': 50, 'store': 'example_corp'}},
            {'ttl': 300, 'body': 'dear', 'attributes': {
                'price': {'Type': 'Number', 'Value': '210.75'},
                'store': 'example_corp'}},
            {'ttl': 300, 'body': {'order': {'total': 12, 'state': 'paid'}}},
            {'ttl': 300, 'body': {'order': {'total': 12, 'state': 'void'}}},
            {'ttl': 300, 'body': {'order': {'total': 9}}},
        ])
        received = self.receipts(['attrs', 'body'], {'attrs': 1, 'body': 1})
        self.assertEqual(['dear'], received['attrs'])
        self.assertEqual([{'order': {'total': 12, 'state': 'paid'}}],
                         received['body'])

    def test_every_kind_of_a_subscription_must_accept(self):
        self.subscribe('both', {'filter_policies': ['order'],
                                'binding_keys': ['shop.*']})
        self.subscribe('open', {})
        self.post([
            {'ttl': 300, 'body': 1, 'filter_policies': ['order'],
             'routing_key': 'shop.eu'},
            {'ttl': 300, 'body': 2, 'filter_policies': ['order']},
            {'ttl': 300, 'body': 3, 'routing_key': 'shop.eu'},
        ])
        received = self.receipts(['both', 'open'], {'both': 1, 'open': 3})
        self.assertEqual([1], received['both'])

    def test_notifications_carry_the_filter_fields(self):
        self.subscribe('A', {})
        message = {'ttl': 300, 'body': {'id': 7},
                   'filter_policies': ['b', 'a'], 'routing_key': 'x.y',
                   'attributes': {'k': {'Type': 'String', 'Value': 'v'}}}
        self.post([message])
        [request] = self.receiver.wait_for(1, self.queue + '/A')
        self.assertEqual(dict(message, filter_policies=['a', 'b'],
                              Message_Type='Notification',
                              queue_name=self.queue), request.json)

    def test_a_policy_update_applies_to_the_next_post(self):
        sub_id = self.subscribe('A', {'filter_policies': ['old']})
        self.post([{'ttl': 300, 'body': 'first', 'filter_policies': ['new']}])
        response = self.client.patch(
            '/v2/queues/%s/subscriptions/%s' % (self.queue, sub_id),
            json={'options': {'filter_policies': ['new']}})
        self.assertEqual(204, response.status_code, response.text)
        self.post([{'ttl': 300, 'body': 'second',
                    'filter_policies': ['new']}])
        self.assertEqual({'A': ['second']}, self.receipts('A', {'A': 1}))

    def test_a_deleted_subscription_gets_nothing_more(self):
        sub_id = self.subscribe('A', {})
        response = self.client.delete(
            '/v2/queues/%s/subscriptions/%s' % (self.queue, sub_id))
        self.assertEqual(204, response.status_code)
        self.post([{'ttl': 300, 'body': 'after'}])
        self.assertEqual({'A': []}, self.receipts('A', {}))

    def test_invalid_policies_are_rejected_and_nothing_changes(self):
        response = self.client.subscribe(
            self.queue, self.receiver.url('x'),
            {'filter_policies': ['abcdefghijklmnopq']})
        self.assertEqual(400, response.status_code)
        self.assertEqual("filter_policies: tag 'abcdefghijklmnopq' has 17 "
                         "characters; the limit is 16",
                         response.json()['description'])
        listing = self.client.get('/v2/queues/%s/subscriptions' % self.queue)
        self.assertEqual([], listing.json()['subscriptions'])

        sub_id = self.subscribe('A', {'binding_keys': ['a.#']})
        for options, text in (
                ({'binding_keys': ['a..b']}, 'has an empty word'),
                ({'filter_policy': {'k': [{'numeric': ['>', 'x']}]}},
                 "Value of > must be numeric, not 'x'"),
                ({'filter_policy': {'order': {'state': ['paid']}}},
                 'Filter policy scope MessageAttributes does not support '
                 'nested filter policy')):
            response = self.client.patch(
                '/v2/queues/%s/subscriptions/%s' % (self.queue, sub_id),
                json={'options': options})
            self.assertEqual(400, response.status_code, response.text)
            self.assertIn(text, response.json()['description'])
        stored = self.client.get('/v2/queues/%s/subscriptions/%s'
                                 % (self.queue, sub_id)).json()
        self.assertEqual({'binding_keys': ['a.#']}, stored['options'])

    def test_filter_fields_inside_the_body(self):
        # For clients that cannot send top-level fields (websocket, the
        # stock zaqar-server).
        self.subscribe('A', {'filter_policies': ['apple']})
        body = {'_filtering': {'filter_policies': ['apple']}, 'n': 1}
        self.post([{'ttl': 300, 'body': body},
                   {'ttl': 300, 'body': {'_filtering': {}, 'n': 2}}])
        [request] = self.receiver.wait_for(1, self.queue + '/A')
        time.sleep(GRACE)
        self.assertEqual(1, len(self.receiver.requests(self.queue + '/A')))
        self.assertEqual(['apple'], request.json['filter_policies'])
        self.assertEqual(body, request.json['body'])

        response = self.client.post_messages(self.queue, [
            {'ttl': 300, 'body': 'fine'},
            {'ttl': 300, 'body': {'_filtering': {'routing_key': 'a.*'}}}])
        self.assertEqual(400, response.status_code)
        self.assertIn("messages[1]: body/_filtering/routing_key: routing key "
                      "'a.*'", response.json()['description'])
        self.assertEqual(2, self.client.total_messages(self.queue))

    def test_a_queue_of_1000_subscriptions(self):
        # Creating subscriptions through Zaqar's API costs O(n) each with
        # redis, so 1,000 are written straight into its schema; the one
        # created through the API afterwards tells the server.
        project = self.client.session.headers['X-Project-ID']
        self.redis.seed_subscriptions(project, self.queue, [
            (self.receiver.url('%s/s%d' % (self.queue, i)),
             {'filter_policies': ['hot' if i % 100 == 0 else 'cold%d' % i]})
            for i in range(1000)])
        self.subscribe('api', {'filter_policies': ['hot']})
        self.post([{'ttl': 300, 'body': 'x', 'filter_policies': ['hot']}])
        received = self.receiver.wait_for(11, self.queue)
        time.sleep(GRACE)
        self.assertEqual(
            {'/%s/s%d' % (self.queue, i) for i in range(0, 1000, 100)}
            | {'/%s/api' % self.queue},
            {r.path for r in self.receiver.requests(self.queue)})
        self.assertEqual(11, len(received))
