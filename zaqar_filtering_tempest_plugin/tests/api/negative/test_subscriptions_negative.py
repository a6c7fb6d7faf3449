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

"""Invalid filter policies are rejected with 400 and change nothing."""

from tempest.lib import decorators

from zaqar_filtering_tempest_plugin.tests import base

SUBSCRIBER = 'http://127.0.0.1:9/filtering-negative'


class TestFilteringSubscriptionsNegative(base.BaseFilteringTest):

    def setUp(self):
        super().setUp()
        self.queue_name = self.create_test_queue()

    def assert_rejected(self, options, needle):
        description = self.assertBadRequest(
            needle, self.client.create_subscription, self.queue_name,
            {'subscriber': SUBSCRIBER, 'ttl': 3600, 'options': options})
        _, body = self.client.list_subscription(self.queue_name)
        self.assertEqual([], body['subscriptions'])
        return description

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('6e2b9d41-7c3a-4f85-a1e9-0b4d8c2f5a01')
    def test_tag_too_long(self):
        # The description names the option, the value and the rule.
        self.assert_rejected(
            {'filter_policies': ['abcdefghijklmnopq']},
            "filter_policies: tag 'abcdefghijklmnopq' has 17 characters; "
            "the limit is %d" % self.filtering_cfg.max_tag_length)

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('a3f7c152-8d4b-4e96-b2fa-1c5e9d3a6b12')
    def test_too_many_tags(self):
        count = self.filtering_cfg.max_tags + 1
        self.assert_rejected(
            {'filter_policies': ['tag%d' % i for i in range(count)]},
            'filter_policies: %d tags; the limit is %d' % (
                count, self.filtering_cfg.max_tags))

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('f8c4a263-9e5c-4fa7-83ab-2d6fae4b7c23')
    def test_tags_not_a_list(self):
        self.assert_rejected({'filter_policies': 'apple'},
                             'filter_policies: must be a list of tags')

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('2d9e5b74-af6d-4ab8-94bc-3e7a0f5c8d34')
    def test_empty_tag(self):
        self.assert_rejected({'filter_policies': ['']},
                             "filter_policies: tag '' is empty")

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('7b1f6c85-b07e-4bc9-a5cd-4f8b1a6d9e45')
    def test_binding_key_wildcard_inside_word(self):
        self.assert_rejected({'binding_keys': ['order.a*']},
                             "binding_keys: binding key 'order.a*'")

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('c0a2e796-c18f-4cda-b6de-5a9c2b7e0f56')
    def test_binding_key_empty_word(self):
        self.assert_rejected({'binding_keys': ['a..b']},
                             "binding_keys: binding key 'a..b' has an "
                             "empty word")

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('4e3b08a7-d29a-4deb-87ef-6b0d3c8f1a67')
    def test_binding_key_too_many_words(self):
        words = self.filtering_cfg.max_key_words + 1
        self.assert_rejected(
            {'binding_keys': ['.'.join('a' * words)]},
            'has %d words; the limit is %d' % (
                words, self.filtering_cfg.max_key_words))

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('9f4c19b8-e3ab-4efc-98f0-7c1e4d9a2b78')
    def test_binding_key_too_long(self):
        size = self.filtering_cfg.max_key_bytes + 1
        self.assert_rejected(
            {'binding_keys': ['a' * size]},
            'has %d bytes; the limit is %d' % (
                size, self.filtering_cfg.max_key_bytes))

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('1a5d2ac9-f4bc-4f0d-a901-8d2f5e0b3c89')
    def test_too_many_binding_keys(self):
        count = self.filtering_cfg.max_binding_keys + 1
        self.assert_rejected(
            {'binding_keys': ['k%d.#' % i for i in range(count)]},
            'binding_keys: %d binding keys; the limit is %d' % (
                count, self.filtering_cfg.max_binding_keys))

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('b6e73bda-05cd-4a1e-8b12-9e3a6f1c4d9a')
    def test_filter_policy_as_json_text(self):
        self.assert_rejected({'filter_policy': '{"store": ["a"]}'},
                             'filter_policy: must be a JSON object')

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('3c8f4ceb-16de-4b2f-9c23-af4b7a2d5eab')
    def test_filter_policy_too_many_keys(self):
        count = self.filtering_cfg.max_policy_keys + 1
        self.assert_rejected(
            {'filter_policy': {'k%d' % i: ['x'] for i in range(count)}},
            'filter_policy: Filter policy can not have more than %d keys'
            % self.filtering_cfg.max_policy_keys)

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('8d9a5dfc-27ef-4c30-ad34-b05c8b3e6fbc')
    def test_filter_policy_number_out_of_range(self):
        self.assert_rejected(
            {'filter_policy': {'price': [{'numeric': ['>', 1e10]}]}},
            'filter_policy/price/0/numeric/1: number')

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('e1b6ae0d-38f0-4d41-be45-c16d9c4f7acd')
    def test_filter_policy_unknown_scope(self):
        self.assert_rejected(
            {'filter_policy': {'store': ['a']},
             'filter_policy_scope': 'Body'},
            'filter_policy_scope: must be "MessageAttributes" or '
            '"MessageBody"')

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('5f2c7b1e-4901-4e52-8f56-d27ead5b8bde')
    def test_update_with_invalid_policy(self):
        # The subscription keeps its policy.
        subscription_id = self.subscribe(self.queue_name, SUBSCRIBER,
                                         {'filter_policies': ['apple']})
        self.assertBadRequest(
            "filter_policies: tag 'abcdefghijklmnopq' has 17 characters",
            self.client.update_subscription, self.queue_name,
            subscription_id,
            {'options': {'filter_policies': ['abcdefghijklmnopq']}})
        _, body = self.client.show_subscription(self.queue_name,
                                                subscription_id)
        self.assertEqual(['apple'], body['options']['filter_policies'])
