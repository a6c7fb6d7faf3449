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

"""Ordered queues (Xiaomi EMQ's TopicQueue): claims per ordering key.

Needs ``zaqar_filtering.ordering`` in Zaqar's message and claim pipelines.
"""

from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils
from tempest.lib import decorators

from zaqar_filtering_tempest_plugin.tests import base

CLAIM = {'ttl': 60, 'grace': 60}


class TestOrderedQueues(base.BaseFilteringTest):

    def create_ordered_queue(self):
        queue_name = data_utils.rand_name('Filtering-Ordered')
        self.client.create_queue(queue_name, {'_ordered_by_key': True})
        self.addCleanup(test_utils.call_and_ignore_notfound_exc,
                        self.client.delete_queue, queue_name)
        return queue_name

    def claim(self, queue_name, limit=10):
        """Claim up to ``limit`` messages; return (claim href, messages)."""
        resp, body = self.client.post_claims(queue_name, CLAIM,
                                             url_params={'limit': limit})
        if resp['status'] == '204':
            return None, []
        return resp['location'], body['messages']

    def names(self, messages):
        return [message['body']['n'] for message in messages]

    @decorators.idempotent_id('3f7c2a91-6d4e-4b8a-9e15-c2b0d8a47f63')
    def test_claims_give_the_oldest_message_of_each_key(self):
        queue_name = self.create_ordered_queue()
        self.post(queue_name,
                  {'body': {'n': 'a1'}, 'ordering_key': 'a'},
                  {'body': {'n': 'b1'}, 'ordering_key': 'b'},
                  {'body': {'n': 'a2'}, 'ordering_key': 'a'},
                  {'body': {'n': 'u1'}},
                  {'body': {'n': 'b2'}, 'ordering_key': 'b'})
        _, claimed = self.claim(queue_name)
        self.assertEqual(['a1', 'b1', 'u1'], self.names(claimed))
        # Nothing more of a or b while their first messages are claimed.
        self.assertEqual((None, []), self.claim(queue_name))
        self.client.delete_messages(claimed[1]['href'])
        _, claimed = self.claim(queue_name)
        self.assertEqual(['b2'], self.names(claimed))

    @decorators.idempotent_id('a9d04e5b-1c73-4f26-8b3e-7e6f2d19c850')
    def test_a_released_claim_gives_the_same_message_again(self):
        queue_name = self.create_ordered_queue()
        self.post(queue_name, {'body': {'n': 1}, 'ordering_key': 'k'},
                  {'body': {'n': 2}, 'ordering_key': 'k'})
        href, claimed = self.claim(queue_name)
        self.assertEqual([1], self.names(claimed))
        self.client.delete_claim(href)
        _, claimed = self.claim(queue_name)
        self.assertEqual([1], self.names(claimed))
        self.client.delete_messages(claimed[0]['href'])
        self.assertEqual([2], self.names(self.claim(queue_name)[1]))

    @decorators.idempotent_id('5b8e13c7-0f2a-4d69-a4c1-98e3b6f07d2e')
    def test_bad_flag_and_bad_key_are_refused(self):
        self.assertBadRequest(
            '_ordered_by_key: must be true or false',
            self.client.create_queue, data_utils.rand_name('Filtering'),
            {'_ordered_by_key': 'yes'})
        queue_name = self.create_ordered_queue()
        self.assertBadRequest(
            'ordering_key: is empty', self.post, queue_name,
            {'body': {'n': 1}, 'ordering_key': 'k'},
            {'body': {'n': 2}, 'ordering_key': ''})
        # One bad key refuses the whole batch.
        self.assertEqual(0, self.client.total_messages(queue_name))
