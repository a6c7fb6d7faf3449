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

"""Messages with filter fields are accepted and stored as usual."""

from tempest.lib import decorators

from zaqar_filtering_tempest_plugin.tests import base


class TestFilteringMessages(base.BaseFilteringTest):

    @decorators.idempotent_id('c4f1a0b2-c189-46da-a77e-5fa025d3f365')
    def test_post_with_every_field(self):
        queue_name = self.create_test_queue()
        resp, body = self.post(
            queue_name,
            {'body': {'order': 1234}, 'filter_policies': ['order_placed'],
             'routing_key': 'order.placed.eu',
             'attributes': {
                 'store': 'example_corp',
                 'price_usd': {'Type': 'Number', 'Value': '210.75'},
                 'sizes': ['S', 'M'],
                 'event': {'Type': 'String', 'Value': 'order_placed'}}},
            {'body': 'plain', 'filter_policies': ['order_paid']},
            {'body': 'no fields'})
        self.assertEqual('201', resp['status'])
        self.assertEqual(3, len(body['resources']))
        self.assertEqual(3, self.client.total_messages(queue_name))

    @decorators.idempotent_id('8b2e5c13-d29a-47eb-b88f-60a136e4a476')
    def test_stored_messages_read_back(self):
        # Filter fields decide push delivery only; what is stored and read
        # back is Zaqar's own message.
        queue_name = self.create_test_queue()
        self.post(queue_name, {'body': {'n': 1}, 'routing_key': 'a.b'})
        _, messages = self.client.list_all_messages(queue_name)
        self.assertEqual([{'n': 1}], [m['body'] for m in messages])
