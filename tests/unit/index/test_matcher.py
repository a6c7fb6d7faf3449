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

"""Matcher behaviour: the CMQ seed scenarios, the rule table, AND across
kinds, and incremental add / remove."""

import collections
import unittest

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import Matcher

SCENARIO_TAGS = ['apple', 'imac', 'iphone', 'macbook']


def receipts(subscribers, messages):
    matcher = Matcher()
    for name, options in subscribers.items():
        matcher.add(name, options)
    received = collections.Counter({name: 0 for name in subscribers})
    for message in messages:
        received.update(matcher.match(message))
    return dict(received)


def tagged_messages(count=100):
    return [{'body': i, 'filter_policies': SCENARIO_TAGS}
            for i in range(count)]


class TestSeedScenarios(unittest.TestCase):
    """Tencent CMQ "Tag Matching" scenarios 1-3 (shared/seeds/000)."""

    def test_scenario_1(self):
        subscribers = {'A': {'filter_policies': ['apple']},
                       'B': {'filter_policies': ['xiaomi']},
                       'C': {'filter_policies': ['imac', 'xiaomi']},
                       'D': {}}
        self.assertEqual({'A': 100, 'B': 0, 'C': 100, 'D': 100},
                         receipts(subscribers, tagged_messages()))

    def test_scenario_2_subscribers_without_tags_receive_all(self):
        subscribers = {name: {} for name in 'ABCD'}
        self.assertEqual({name: 100 for name in 'ABCD'},
                         receipts(subscribers, tagged_messages()))

    def test_scenario_3_no_match_means_no_delivery(self):
        self.assertEqual({'A': 0}, receipts(
            {'A': {'filter_policies': ['xiaomi']}}, tagged_messages()))


class TestRuleSummary(unittest.TestCase):
    """The rule-summary table of the CMQ document and Zaqar's spec."""

    def test_table(self):
        rows = [
            # subscriber tags, message tags, delivered
            (['a'], None, False),                   # A: yes / no
            (None, ['a'], True),                    # B: no / yes
            (['a', 'b', 'c', 'd'], ['x', 'd'], True),  # C: N:M, one common
            (['a', 'b'], ['x', 'y'], False),        # C: yes / yes, none common
            (None, None, True),                     # D: no / no
            ([], ['a'], True),                      # an empty list is absent
            (['a'], [], False),
            (['Apple'], ['apple'], False),          # case-sensitive
        ]
        for sub_tags, message_tags, delivered in rows:
            with self.subTest(sub=sub_tags, message=message_tags):
                matcher = Matcher()
                matcher.add('s', {'filter_policies': sub_tags})
                message = {'body': 'x'}
                if message_tags is not None:
                    message['filter_policies'] = message_tags
                self.assertEqual({'s'} if delivered else set(),
                                 matcher.match(message))


class TestBindingKeys(unittest.TestCase):
    """CMQ "Routing Key Matching" examples (shared/seeds/002)."""

    def test_examples(self):
        matcher = Matcher()
        matcher.add('star', {'binding_keys': ['1.*.0']})
        matcher.add('hash', {'binding_keys': ['1.#.0']})
        matcher.add('all', {'binding_keys': ['#']})
        self.assertEqual({'star', 'hash', 'all'},
                         matcher.match({'routing_key': '1.x.0'}))
        self.assertEqual({'hash', 'all'},
                         matcher.match({'routing_key': '1.2.3.4.4.2.2.0'}))
        self.assertEqual({'hash', 'all'},
                         matcher.match({'routing_key': '1.0'}))
        self.assertEqual({'all'}, matcher.match({'routing_key': 'x'}))

    def test_no_routing_key_no_delivery(self):
        matcher = Matcher()
        matcher.add('all', {'binding_keys': ['#']})
        matcher.add('open', {})
        self.assertEqual({'open'}, matcher.match({'body': 1}))

    def test_any_key_of_a_subscription_suffices(self):
        matcher = Matcher()
        matcher.add('s', {'binding_keys': ['a.*', 'b.#']})
        self.assertEqual({'s'}, matcher.match({'routing_key': 'b.c.d'}))
        self.assertEqual({'s'}, matcher.match({'routing_key': 'a.c'}))
        self.assertEqual(set(), matcher.match({'routing_key': 'a.c.d'}))


class TestKindsCombined(unittest.TestCase):

    def setUp(self):
        self.matcher = Matcher()
        self.matcher.add('all-kinds', {
            'filter_policies': ['order'],
            'binding_keys': ['shop.*'],
            'filter_policy': {'price': [{'numeric': ['>', 100]}]}})

    def test_every_kind_must_accept(self):
        message = {'filter_policies': ['order'], 'routing_key': 'shop.eu',
                   'attributes': {'price': 150}}
        self.assertEqual({'all-kinds'}, self.matcher.match(message))
        for field, other in (('filter_policies', ['refund']),
                             ('routing_key', 'shop.eu.x'),
                             ('attributes', {'price': 50})):
            with self.subTest(field=field):
                self.assertEqual(set(), self.matcher.match(
                    dict(message, **{field: other})))

    def test_body_scope(self):
        matcher = Matcher()
        matcher.add('b', {'filter_policy_scope': 'MessageBody',
                          'filter_policy': {'order': {'total': [
                              {'numeric': ['>=', 10]}]}}})
        self.assertEqual({'b'}, matcher.match({'body': {'order': {
            'total': 10}}}))
        self.assertEqual(set(), matcher.match({'body': {'order': {
            'total': 9.99}}}))
        self.assertEqual(set(), matcher.match({'attributes': {
            'order.total': 10}}))


class TestAddRemove(unittest.TestCase):

    def test_add_replaces_the_policy(self):
        matcher = Matcher()
        matcher.add('s', {'filter_policies': ['a']})
        matcher.add('s', {'binding_keys': ['k']})
        self.assertEqual(1, len(matcher))
        self.assertEqual(set(), matcher.match({'filter_policies': ['a']}))
        self.assertEqual({'s'}, matcher.match({'routing_key': 'k'}))

    def test_remove(self):
        matcher = Matcher()
        kinds = [{'filter_policies': ['a']}, {'binding_keys': ['#']},
                 {'filter_policy': {'k': ['v']}},
                 {'filter_policy_scope': 'MessageBody',
                  'filter_policy': {'k': [{'anything-but': 'w'}]}}, {}]
        for number, options in enumerate(kinds):
            matcher.add(number, options)
        message = {'filter_policies': ['a'], 'routing_key': 'r',
                   'attributes': {'k': 'v'}, 'body': {'k': 'v'}}
        self.assertEqual(set(range(len(kinds))), matcher.match(message))
        for number in range(len(kinds)):
            matcher.remove(number)
            self.assertNotIn(number, matcher)
            self.assertEqual(set(range(number + 1, len(kinds))),
                             matcher.match(message))
        matcher.remove('never-added')
        self.assertEqual(0, len(matcher))

    def test_remove_leaves_shared_index_entries_of_others(self):
        matcher = Matcher()
        for name in ('x', 'y'):
            matcher.add(name, {'filter_policy': {
                'ip': [{'cidr': '10.0.0.0/8'}], 'n': [{'numeric': ['>', 1]}],
            }})
        matcher.remove('x')
        self.assertEqual({'y'}, matcher.match(
            {'attributes': {'ip': '10.1.2.3', 'n': 2}}))

    def test_invalid_add_changes_nothing(self):
        matcher = Matcher()
        matcher.add('s', {'filter_policies': ['a']})
        with self.assertRaises(InvalidPolicy):
            matcher.add('s', {'filter_policies': ['a' * 17]})
        self.assertEqual({'s'}, matcher.match({'filter_policies': ['a']}))

    def test_unreadable_message_fields_count_as_absent(self):
        matcher = Matcher()
        matcher.add('tags', {'filter_policies': ['a']})
        matcher.add('keys', {'binding_keys': ['#']})
        matcher.add('open', {})
        message = {'filter_policies': 'a', 'routing_key': 7,
                   'attributes': ['x']}
        self.assertEqual({'open'}, matcher.match(message))

    def test_message_must_be_an_object(self):
        with self.assertRaises(InvalidPolicy):
            Matcher().match(['not', 'a', 'message'])


class TestIndexSelectivity(unittest.TestCase):
    """A value every policy shares must not make a message visit them all.

    Measured by the lookups the automaton makes for one message, which is
    what a match costs; timings live in bench/.
    """

    def lookups(self, matcher, message):
        from zaqar_filtering.policy.message import read_attributes

        class CountingFields(dict):
            count = 0

            def get(self, key, default=None):
                CountingFields.count += 1
                return super().get(key, default)

        fields = CountingFields(read_attributes(message))
        matcher._attributes.find(fields, set())
        return CountingFields.count

    def test_shared_value_is_not_walked_per_subscription(self):
        # Ten subscriptions per store at both sizes, so ten matches.
        for size in (1000, 10000):
            with self.subTest(size=size):
                matcher = Matcher()
                for number in range(size):
                    matcher.add(number, {'filter_policy': {
                        'status': ['paid'],
                        'store': ['s%d' % (number % (size // 10))],
                        'price': [{'numeric': ['>', 0]}]}})
                message = {'attributes': {'status': 'paid', 'store': 's7',
                                          'price': 10}}
                self.assertEqual(set(range(7, size, size // 10)),
                                 matcher.match(message))
                self.assertLessEqual(self.lookups(matcher, message), 5)

    def test_removal_leaves_an_empty_automaton(self):
        matcher = Matcher()
        for number in range(50):
            matcher.add(number, {'filter_policy': {
                'status': ['paid'], 'store': ['s%d' % number]}})
        for number in range(50):
            matcher.remove(number)
        self.assertEqual({}, matcher._attributes.paths)
        self.assertEqual({}, matcher._attributes.root.edges)
        self.assertFalse(matcher._attributes)
