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

"""Why a subscription does not get a message: one reason per policy kind
and operator, in the words the match API answers with."""

import unittest

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from zaqar_filtering.policy.message import MessageView
from zaqar_filtering.policy.subscription import parse_options


def explain(options, message):
    policy = parse_options(options)
    reason = policy.explain(MessageView(message))
    # The reference rule and the explanation never disagree.
    assert policy.matches(MessageView(message)) == (reason is None), reason
    return reason


def attributes(policy, **values):
    return explain({'filter_policy': policy}, {'attributes': values})


class TestExplainTags(unittest.TestCase):

    def test_no_common_tag(self):
        self.assertEqual(
            "filter_policies: the message's tags [apple, imac] share none "
            "of [xiaomi]",
            explain({'filter_policies': ['xiaomi']},
                    {'filter_policies': ['imac', 'apple']}))

    def test_message_without_tags(self):
        self.assertEqual(
            'filter_policies: the message has no tags (the subscription '
            'wants one of [a, b])',
            explain({'filter_policies': ['b', 'a']}, {'body': 1}))

    def test_a_common_tag_matches(self):
        self.assertIsNone(explain({'filter_policies': ['a', 'b']},
                                  {'filter_policies': ['b', 'c']}))
        self.assertIsNone(explain({}, {'filter_policies': ['b']}))


class TestExplainBindingKeys(unittest.TestCase):

    def test_no_key_matches(self):
        self.assertEqual(
            "binding_keys: routing key 'audit.eu' matches none of "
            "[order.#, order.*.eu]",
            explain({'binding_keys': ['order.*.eu', 'order.#']},
                    {'routing_key': 'audit.eu'}))

    def test_message_without_routing_key(self):
        self.assertEqual(
            'binding_keys: the message has no routing key (the '
            'subscription wants one matching [#])',
            explain({'binding_keys': ['#']}, {'body': 1}))

    def test_one_key_matches(self):
        self.assertIsNone(explain({'binding_keys': ['x', '1.#.0']},
                                  {'routing_key': '1.0'}))


class TestExplainFilterPolicy(unittest.TestCase):

    def test_operators(self):
        table = [
            ({'color': ['red']}, {'color': 'blue'},
             "color 'blue' is not 'red'"),
            ({'n': [1, 'one']}, {'n': 2}, "n 2 is not any of [1, 'one']"),
            ({'n': [True]}, {'n': 'true'}, "n 'true' is not true"),
            ({'s': [{'prefix': 'eu-'}]}, {'s': 'us-east'},
             "s 'us-east' is not prefix 'eu-'"),
            ({'f': [{'suffix': '.png'}]}, {'f': 'a.jpg'},
             "f 'a.jpg' is not suffix '.png'"),
            ({'c': [{'equals-ignore-case': 'Red'}]}, {'c': 'blue'},
             "c 'blue' is not equals-ignore-case 'red'"),
            ({'c': [{'anything-but': ['a', 'b']}]}, {'c': 'a'},
             "c 'a' is not anything-but ['a', 'b']"),
            ({'c': [{'anything-but': {'prefix': 'tmp'}}]}, {'c': 'tmp1'},
             "c 'tmp1' is not anything-but prefix 'tmp'"),
            ({'price': [{'numeric': ['>', 200]}]}, {'price': 150},
             'price 150 is not > 200'),
            ({'price': [{'numeric': ['>=', 0, '<', 10]}]}, {'price': 10},
             'price 10 is not >= 0 and < 10'),
            ({'price': [{'numeric': ['=', 5]}]}, {'price': [1, 2]},
             'price [1, 2] is not = 5'),
            ({'price': [{'numeric': ['<=', 5]}]}, {'price': '3'},
             "price '3' is not a number (the policy wants <= 5)"),
            ({'ip': [{'cidr': '10.0.0.0/24'}]}, {'ip': '10.0.1.1'},
             "ip '10.0.1.1' is not cidr 10.0.0.0/24"),
            ({'x': [{'exists': True}]}, {},
             'the message has no attribute x (the policy wants exists)'),
            ({'x': [{'exists': False}]}, {'x': 'here'},
             "x is 'here' but the policy wants it absent"),
            ({'price': [{'numeric': ['>', 200]}]}, {},
             'the message has no attribute price (the policy wants > 200)'),
        ]
        for policy, values, reason in table:
            with self.subTest(policy=policy, values=values):
                self.assertEqual('filter_policy: ' + reason,
                                 attributes(policy, **values))

    def test_every_failing_key_is_named(self):
        self.assertEqual(
            "filter_policy: color 'blue' is not 'red' and the message has "
            "no attribute size (the policy wants 'L')",
            attributes({'color': ['red'], 'size': ['L'], 'n': [1]},
                       color='blue', n=1))

    def test_alternatives(self):
        self.assertEqual(
            "filter_policy: no alternative matches: (1) a 'z' is not 'x'; "
            "(2) the message has no attribute b (the policy wants 'y')",
            attributes({'$or': [{'a': ['x']}, {'b': ['y']}]}, a='z'))

    def test_a_condition_every_alternative_shares_is_named_alone(self):
        self.assertEqual(
            "filter_policy: c 'a' is not anything-but ['a']",
            attributes({'c': [{'anything-but': 'a'}],
                        '$or': [{'a': ['x']}, {'b': ['y']}]},
                       a='z', c='a'))

    def test_many_alternatives_are_cut_short(self):
        reason = attributes({'$or': [{'k%d' % i: ['v']} for i in range(5)]})
        self.assertTrue(reason.endswith('; and 2 more'), reason)
        self.assertIn('(3) the message has no attribute k2', reason)
        self.assertNotIn('(4)', reason)

    def test_message_body_scope(self):
        options = {
            'filter_policy': {'order': {'total': [{'numeric': ['>', 100]}]}},
            'filter_policy_scope': 'MessageBody'}
        self.assertEqual(
            'filter_policy: order.total 99 is not > 100',
            explain(options, {'body': {'order': {'total': 99}}}))
        self.assertEqual(
            'filter_policy: the message body has no field order.total '
            '(the policy wants > 100)',
            explain(options, {'body': 'not JSON'}))

    def test_long_values_are_cut_short(self):
        reason = attributes({'n': [0]}, n=list(range(1, 14)))
        self.assertEqual(
            'filter_policy: n [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ... 3 more] '
            'is not 0', reason)


class TestExplainKinds(unittest.TestCase):

    def test_every_rejecting_kind_is_named(self):
        self.assertEqual(
            "binding_keys: routing key 'b.c' matches none of [a.*]; "
            "filter_policy: the message has no attribute x (the policy "
            "wants '1')",
            explain({'filter_policies': ['t'], 'binding_keys': ['a.*'],
                     'filter_policy': {'x': ['1']}},
                    {'filter_policies': ['t'], 'routing_key': 'b.c'}))

    def test_unfiltered_subscription_gets_everything(self):
        self.assertIsNone(explain({}, {}))


WORDS = st.sampled_from(['a', 'b', 'c', '*', '#'])
TAGS = st.lists(st.sampled_from(['a', 'b', 'c']), max_size=3)


@given(tags=TAGS, message_tags=st.one_of(st.none(), TAGS),
       keys=st.lists(st.lists(WORDS, min_size=1, max_size=3).map('.'.join),
                     max_size=3),
       routing=st.one_of(st.none(), st.lists(
           st.sampled_from(['a', 'b', 'c']), min_size=1, max_size=4
       ).map('.'.join)),
       number=st.one_of(st.none(), st.integers(-3, 3)))
@settings(max_examples=300, deadline=None)
def check_agreement(tags, message_tags, keys, routing, number):
    options = {'filter_policies': tags, 'binding_keys': keys,
               'filter_policy': {'$or': [{'n': [{'numeric': ['>', 0]}]},
                                         {'m': [{'exists': True}]}]}}
    message = {'filter_policies': message_tags, 'routing_key': routing,
               'attributes': {} if number is None else {'n': number}}
    explain(options, message)


class TestExplainAgreesWithMatches(unittest.TestCase):

    def test_generated(self):
        check_agreement()
