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

"""Topics fanned out into queue subscribers (CMQ's topic -> queue).

A ``queue:NAME`` subscriber turns each matching message into a message of
queue NAME of the same project, which the test reads back.
"""

from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils
from tempest.lib import decorators

from zaqar_filtering_tempest_plugin.tests import base


class TestTopics(base.BaseFilteringTest):

    def create_test_topic(self):
        topic_name = data_utils.rand_name('Filtering-Topic')
        self.client.create_topic(topic_name)
        self.addCleanup(test_utils.call_and_ignore_notfound_exc,
                        self.client.delete_topic, topic_name)
        return topic_name

    def bodies(self, queue_name, count):
        """Wait for ``count`` messages in a queue; return their bodies."""
        test_utils.call_until_true(
            lambda: self.client.total_messages(queue_name) >= count,
            self.filtering_cfg.delivery_timeout, 0.5)
        _, messages = self.client.list_all_messages(queue_name)
        return sorted(m['body']['n'] for m in messages)

    @decorators.idempotent_id('0b0a7f36-5c1d-4f0e-9d57-2f4a8e51c7a1')
    def test_topic_delivers_to_queue_subscribers_by_policy(self):
        topic = self.create_test_topic()
        placed = self.create_test_queue('Filtering-Placed')
        cancelled = self.create_test_queue('Filtering-Cancelled')
        self.client.create_topic_subscription(topic, {
            'subscriber': 'queue:' + placed, 'ttl': 3600,
            'options': {'filter_policies': ['order_placed']}})
        self.client.create_topic_subscription(topic, {
            'subscriber': 'queue:' + cancelled, 'ttl': 3600,
            'options': {'binding_keys': ['order.cancelled.#']}})
        self.client.post_topic_messages(topic, {'messages': [
            {'body': {'n': 1}, 'ttl': 300,
             'filter_policies': ['order_placed']},
            {'body': {'n': 2}, 'ttl': 300,
             'routing_key': 'order.cancelled.eu'},
            {'body': {'n': 3}, 'ttl': 300, 'filter_policies': ['other']}]})
        self.assertEqual([1], self.bodies(placed, 1))
        self.assertEqual([2], self.bodies(cancelled, 1))
        _, stats = self.client.show_topic_stats(topic)
        self.assertEqual(0, stats['messages']['retained'])

    @decorators.idempotent_id('6c2d1e84-93f7-4b6a-8a0e-d5b3c91f2e47')
    def test_queue_subscriber_on_a_queue(self):
        source = self.create_test_queue()
        target = self.create_test_queue('Filtering-Target')
        self.subscribe(source, 'queue:' + target,
                       {'filter_policy': {'amount': [{'numeric': ['>', 10]}]}})
        self.post(source, {'body': {'n': 1}, 'attributes': {'amount': 50}},
                  {'body': {'n': 2}, 'attributes': {'amount': 5}})
        self.assertEqual([1], self.bodies(target, 1))

    @decorators.idempotent_id('a4f5b0c2-7e19-4d3b-b6a8-3c0e9f7d2b15')
    def test_bad_queue_subscriber_is_refused(self):
        topic = self.create_test_topic()
        self.assertBadRequest(
            'may only contain', self.client.create_topic_subscription,
            topic, {'subscriber': 'queue:no/slashes', 'ttl': 3600})
        self.assertBadRequest(
            'names no queue', self.client.create_subscription,
            self.create_test_queue(), {'subscriber': 'queue:', 'ttl': 3600})
