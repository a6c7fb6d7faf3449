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

"""Invalid message filter fields reject the whole post with 400."""

from tempest.lib import decorators

from zaqar_filtering_tempest_plugin.tests import base


class TestFilteringMessagesNegative(base.BaseFilteringTest):

    def setUp(self):
        super().setUp()
        self.queue_name = self.create_test_queue()

    def assert_rejected(self, fields, needle):
        # A valid message in the same post is not stored either.
        self.assertBadRequest(needle, self.post, self.queue_name,
                              {'body': 'valid', 'filter_policies': ['ok']},
                              dict({'body': 'invalid'}, **fields))
        self.assertEqual(0, self.client.total_messages(self.queue_name))

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('0b7e3f5a-5a12-4f63-9067-e38fbe6c9cef')
    def test_routing_key_with_wildcard(self):
        self.assert_rejected({'routing_key': 'order.*'},
                             "routing_key: routing key 'order.*'")

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('6c8f4a6b-6b23-4074-a178-f49acf7dad0f')
    def test_routing_key_empty_word(self):
        self.assert_rejected({'routing_key': 'a..b'},
                             "routing_key: routing key 'a..b' has an "
                             "empty word")

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('d19a5b7c-7c34-4185-b289-0a5bd08ebe10')
    def test_routing_key_not_a_string(self):
        self.assert_rejected({'routing_key': 5},
                             'routing_key: routing key 5 is not a string')

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('4a2b6c8d-8d45-4296-839a-1b6ce19fcf21')
    def test_tags_not_a_list(self):
        self.assert_rejected({'filter_policies': 'apple'},
                             'filter_policies: must be a list of tags')

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('9e3c7d9e-9e56-43a7-944b-2c7df2a0d032')
    def test_too_many_tags(self):
        count = self.filtering_cfg.max_tags + 1
        self.assert_rejected(
            {'filter_policies': ['t%d' % i for i in range(count)]},
            'filter_policies: %d tags; the limit is %d' % (
                count, self.filtering_cfg.max_tags))

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('2f4d8eaf-af67-44b8-a55c-3d8e03b1e143')
    def test_attributes_not_an_object(self):
        self.assert_rejected({'attributes': ['store']},
                             'attributes: must be an object')

    @decorators.attr(type=['negative'])
    @decorators.idempotent_id('7a5e9fb0-b078-45c9-b66d-4e9f14c2f254')
    def test_attribute_with_unknown_type(self):
        self.assert_rejected(
            {'attributes': {'price': {'Type': 'Bogus', 'Value': '1'}}},
            "attributes/price: Type must be one of String, Number, "
            "String.Array, Binary, not 'Bogus'")
