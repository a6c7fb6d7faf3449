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

"""Subscriptions with each kind of filter policy, read back."""

from tempest.lib import decorators

from zaqar_filtering_tempest_plugin.tests import base

SUBSCRIBER = 'http://127.0.0.1:9/filtering'

FILTER_POLICY = {'store': ['example_corp'],
                 'price_usd': [{'numeric': ['>=', 100]}],
                 'event': [{'anything-but': ['order_cancelled']}]}


class TestFilteringSubscriptions(base.BaseFilteringTest):

    def setUp(self):
        super().setUp()
        self.queue_name = self.create_test_queue()

    def create_and_show(self, options):
        subscription_id = self.subscribe(self.queue_name, SUBSCRIBER,
                                         options)
        resp, body = self.client.show_subscription(self.queue_name,
                                                   subscription_id)
        self.assertEqual('200', resp['status'])
        self.assertEqual(SUBSCRIBER, body['subscriber'])
        return subscription_id, body['options']

    @decorators.idempotent_id('0c5f8d2e-6b1f-4d83-9a57-2f6e1a7c4b01')
    def test_create_with_tags(self):
        # Tags come back normalized: distinct and sorted.
        _, options = self.create_and_show(
            {'filter_policies': ['order_placed', 'order_paid',
                                 'order_placed']})
        self.assertEqual(['order_paid', 'order_placed'],
                         options['filter_policies'])

    @decorators.idempotent_id('5a3e2f71-8c0d-4b6a-9e14-7d2b6c9f0a12')
    def test_create_with_binding_keys(self):
        _, options = self.create_and_show(
            {'binding_keys': ['order.*.eu', 'audit.#']})
        self.assertEqual(['audit.#', 'order.*.eu'], options['binding_keys'])

    @decorators.idempotent_id('b7d41c6a-2e95-4f08-8a3b-1c5e9d7f2a23')
    def test_create_with_filter_policy(self):
        _, options = self.create_and_show(
            {'filter_policy': FILTER_POLICY,
             'filter_policy_scope': 'MessageAttributes'})
        self.assertEqual(FILTER_POLICY, options['filter_policy'])
        self.assertEqual('MessageAttributes', options['filter_policy_scope'])

    @decorators.idempotent_id('e2a9f0b3-4d7c-4e61-b8f5-3a6d0c1e7b34')
    def test_create_with_body_scope(self):
        policy = {'order': {'state': ['paid', 'shipped']}}
        _, options = self.create_and_show(
            {'filter_policy': policy, 'filter_policy_scope': 'MessageBody'})
        self.assertEqual(policy, options['filter_policy'])
        self.assertEqual('MessageBody', options['filter_policy_scope'])

    @decorators.idempotent_id('3f6b8e14-9a2d-4c75-a0e6-5b7c2d9f1e45')
    def test_create_with_every_kind(self):
        _, options = self.create_and_show(
            {'filter_policies': ['apple'], 'binding_keys': ['1.#.0'],
             'filter_policy': {'price': [{'numeric': ['>', 10]}]}})
        self.assertEqual(['apple'], options['filter_policies'])
        self.assertEqual(['1.#.0'], options['binding_keys'])
        self.assertEqual({'price': [{'numeric': ['>', 10]}]},
                         options['filter_policy'])

    @decorators.idempotent_id('9c1d7a25-3e8f-4b96-b2c7-6e0f4a8d2b56')
    def test_list_shows_policies(self):
        self.subscribe(self.queue_name, SUBSCRIBER,
                       {'filter_policies': ['apple']})
        self.subscribe(self.queue_name, SUBSCRIBER + '/keys',
                       {'binding_keys': ['#']})
        _, body = self.client.list_subscription(self.queue_name)
        found = {sub['subscriber']: sub['options']
                 for sub in body['subscriptions']}
        self.assertEqual(['apple'], found[SUBSCRIBER]['filter_policies'])
        self.assertEqual(['#'], found[SUBSCRIBER + '/keys']['binding_keys'])

    @decorators.idempotent_id('d4e8b236-5f1a-4ca7-93d8-7f1a5b9e3c67')
    def test_update_policy(self):
        subscription_id, _ = self.create_and_show(
            {'filter_policies': ['apple']})
        self.client.update_subscription(
            self.queue_name, subscription_id,
            {'options': {'binding_keys': ['order.#']}})
        _, body = self.client.show_subscription(self.queue_name,
                                                subscription_id)
        self.assertEqual(['order.#'], body['options']['binding_keys'])
        self.assertNotIn('filter_policies', body['options'])

    @decorators.idempotent_id('1a7f3c48-6b2e-4d09-8e4a-9c3b6f0d4e78')
    def test_create_without_policy_is_stock(self):
        # Options that are no policy are kept as Zaqar keeps them.
        _, options = self.create_and_show({'anything': 'else'})
        self.assertEqual({'anything': 'else'}, options)
