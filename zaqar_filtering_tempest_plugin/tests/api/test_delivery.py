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

"""Filtered delivery, as the seed scenarios (Tencent CMQ, SNS) describe.

Every subscription is a trust+ subscription posting its notifications into a
sink queue of its own; a subscription without policy receives everything
and tells when all notifications have been pushed.
"""

from tempest.lib import decorators

from zaqar_filtering_tempest_plugin.tests import base


class TestFilteredDelivery(base.BaseFilteringTest):

    def setUp(self):
        super().setUp()
        self.queue_name = self.create_test_queue()

    def sinks(self, **options):
        return {name: self.subscribe_sink(self.queue_name, opts)[0]
                for name, opts in options.items()}

    @decorators.idempotent_id('1d6f2e8a-e3ab-48fc-89a0-71b247f5b587')
    def test_tags(self):
        # CMQ scenario 1: A has apple, B xiaomi, C imac and xiaomi, D no
        # tag. Messages tagged apple, imac, iphone and macbook reach A and
        # C; the untagged message reaches only D, which gets everything.
        sinks = self.sinks(A={'filter_policies': ['apple']},
                           B={'filter_policies': ['xiaomi']},
                           C={'filter_policies': ['imac', 'xiaomi']},
                           D={})
        tags = ['apple', 'imac', 'iphone', 'macbook']
        self.post(self.queue_name,
                  {'body': {'n': 1}, 'filter_policies': tags},
                  {'body': {'n': 2}, 'filter_policies': tags},
                  {'body': {'n': 3}})
        got = self.wait_for_notifications(
            {sinks['A']: 2, sinks['C']: 2, sinks['D']: 3})
        got[sinks['B']] = self.notifications(sinks['B'])
        received = {name: sorted(n['body']['n'] for n in got[sink])
                    for name, sink in sinks.items()}
        self.assertEqual({'A': [1, 2], 'B': [], 'C': [1, 2], 'D': [1, 2, 3]},
                         received)
        # A notification carries the message's filter fields.
        [first] = [n for n in got[sinks['A']] if n['body']['n'] == 1]
        self.assertEqual(tags, first['filter_policies'])

    @decorators.idempotent_id('5e8a3f9b-f4bc-4a0d-9ab1-82c358a6c698')
    def test_binding_keys(self):
        # CMQ routing-key matching: '*' is exactly one word, '#' zero or
        # more; a message without a routing key reaches none of them.
        sinks = self.sinks(E={'binding_keys': ['1.*.0']},
                           F={'binding_keys': ['1.#.0']},
                           G={'binding_keys': ['#']},
                           all={})
        keys = ['1.x.0', '1.0', '1.2.3.4.4.2.2.0', '2.0']
        self.post(self.queue_name,
                  *[{'body': {'key': key}, 'routing_key': key}
                    for key in keys] + [{'body': {'key': None}}])
        got = self.wait_for_notifications(
            {sinks['E']: 1, sinks['F']: 3, sinks['G']: 4, sinks['all']: 5})
        received = {name: sorted(n['body']['key'] or '' for n in got[sink])
                    for name, sink in sinks.items()}
        self.assertEqual(
            {'E': ['1.x.0'], 'F': ['1.0', '1.2.3.4.4.2.2.0', '1.x.0'],
             'G': sorted(keys), 'all': sorted(keys + [''])},
            received)
        [note] = got[sinks['E']]
        self.assertEqual('1.x.0', note['routing_key'])

    @decorators.idempotent_id('9a0b4fac-05cd-4b1e-8bc2-93d469b7d7a9')
    def test_filter_policy(self):
        # SNS filter policies on the attributes (the default scope) and on
        # the body (MessageBody scope).
        sinks = self.sinks(
            attrs={'filter_policy': {
                'store': ['example_corp'],
                'price_usd': [{'numeric': ['>=', 100]}]}},
            body={'filter_policy': {'order': {'state': ['paid']}},
                  'filter_policy_scope': 'MessageBody'},
            all={})
        self.post(
            self.queue_name,
            {'body': {'n': 1, 'order': {'state': 'new'}},
             'attributes': {'store': 'example_corp', 'price_usd': {
                 'Type': 'Number', 'Value': '210.75'}}},
            {'body': {'n': 2, 'order': {'state': 'paid'}},
             'attributes': {'store': 'example_corp', 'price_usd': 50}},
            {'body': {'n': 3, 'order': {'state': 'shipped'}},
             'attributes': {'store': 'other', 'price_usd': 500}})
        got = self.wait_for_notifications(
            {sinks['attrs']: 1, sinks['body']: 1, sinks['all']: 3})
        received = {name: sorted(n['body']['n'] for n in got[sink])
                    for name, sink in sinks.items()}
        self.assertEqual({'attrs': [1], 'body': [2], 'all': [1, 2, 3]},
                         received)

    @decorators.idempotent_id('2b1c5abd-16de-4c2f-9cd3-a4e57ac8e8ba')
    def test_every_kind_must_accept(self):
        # Several kinds on one subscription: AND across kinds.
        sinks = self.sinks(both={'filter_policies': ['apple'],
                                 'binding_keys': ['order.#']},
                           all={})
        self.post(self.queue_name,
                  {'body': {'n': 1}, 'filter_policies': ['apple'],
                   'routing_key': 'order.placed'},
                  {'body': {'n': 2}, 'filter_policies': ['apple'],
                   'routing_key': 'audit.placed'},
                  {'body': {'n': 3}, 'filter_policies': ['pear'],
                   'routing_key': 'order.placed'})
        got = self.wait_for_notifications({sinks['both']: 1,
                                           sinks['all']: 3})
        self.assertEqual([1], [n['body']['n'] for n in got[sinks['both']]])

    @decorators.idempotent_id('6f3d7bce-27ef-4d30-8de4-b5f68bd9f9cb')
    def test_policy_update_then_post(self):
        # A policy change applies to the next message posted.
        sink, subscription_id = self.subscribe_sink(
            self.queue_name, {'filter_policies': ['apple']})
        everything, _ = self.subscribe_sink(self.queue_name)
        self.post(self.queue_name,
                  {'body': {'n': 1}, 'filter_policies': ['apple']},
                  {'body': {'n': 2}, 'filter_policies': ['pear']})
        self.wait_for_notifications({sink: 1, everything: 2})
        _, body = self.client.show_subscription(self.queue_name,
                                                subscription_id)
        self.client.update_subscription(
            self.queue_name, subscription_id,
            {'options': dict(body['options'], filter_policies=['pear'])})
        self.post(self.queue_name,
                  {'body': {'n': 3}, 'filter_policies': ['apple']},
                  {'body': {'n': 4}, 'filter_policies': ['pear']})
        got = self.wait_for_notifications({sink: 2, everything: 4})
        self.assertEqual([1, 4], sorted(n['body']['n'] for n in got[sink]))
        self.assertEqual([1, 2, 3, 4],
                         sorted(n['body']['n'] for n in got[everything]))
