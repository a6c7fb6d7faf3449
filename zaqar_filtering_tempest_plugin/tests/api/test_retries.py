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

"""Webhook retries and a subscription's delivery counts, with Keystone."""

import socket

from tempest.lib.common.utils import test_utils
from tempest.lib import decorators
from tempest.lib import exceptions as lib_exc

from zaqar_filtering_tempest_plugin.tests import base


def closed_port_url():
    """Return a webhook URL on 127.0.0.1 that refuses connections."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return 'http://127.0.0.1:%d/hook' % sock.getsockname()[1]


class TestRetries(base.BaseFilteringTest):

    def setUp(self):
        super().setUp()
        self.queue_name = self.create_test_queue()

    @decorators.idempotent_id('9c8f26b1-f52e-4af5-a7a3-abc21f887105')
    def test_failed_delivery_is_pending_with_its_error(self):
        sub_id = self.subscribe(self.queue_name, closed_port_url(), {
            '_retry_policy': {'notify_strategy': 'exponential_decay'}})
        _, counts = self.client.show_subscription_deliveries(
            self.queue_name, sub_id)
        self.assertEqual((0, 0, None), (counts['pending'],
                                        counts['retrying'],
                                        counts['last_error']))
        self.post(self.queue_name, {'body': {'n': 1}})

        def retrying():
            _, counts = self.client.show_subscription_deliveries(
                self.queue_name, sub_id)
            return counts['retrying'] == 1

        self.assertTrue(test_utils.call_until_true(
            retrying, self.filtering_cfg.delivery_timeout, 0.5))
        _, counts = self.client.show_subscription_deliveries(
            self.queue_name, sub_id)
        self.assertEqual(1, counts['pending'])
        self.assertIn('ConnectionRefusedError', counts['last_error'])

    @decorators.idempotent_id('6b2894e9-1b9d-449b-8423-80e1ecec68b4')
    def test_deliveries_of_an_unknown_subscription(self):
        self.assertRaises(lib_exc.NotFound,
                          self.client.show_subscription_deliveries,
                          self.queue_name, '5f0b1f3ad1e5a9b4c8e4f0a1')

    @decorators.idempotent_id('876a385e-0f91-4b2e-9b4d-c467eb8d7c03')
    def test_invalid_notify_strategy(self):
        self.assertBadRequest(
            '_retry_policy/notify_strategy', self.client.create_subscription,
            self.queue_name, {'subscriber': closed_port_url(), 'ttl': 3600,
                              'options': {'_retry_policy': {
                                  'notify_strategy': 'sometimes'}}})
