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

"""Differential property test of the Matcher.

Its indexes must find exactly the subscriptions that evaluating each
subscription on its own accepts.
"""

import unittest

from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import Matcher
from zaqar_filtering.policy.message import MessageView
from zaqar_filtering.policy.subscription import parse_options
from zaqar_filtering import validate_options

SETTINGS = settings(max_examples=200, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.filter_too_much])

# Small vocabularies, so that policies and messages meet often.
TAGS = st.sampled_from(['t1', 't2', 't3', 't4'])
WORDS = ['a', 'b']
STRINGS = ['x', 'y', 'xy', 'XY', 'yx', '', '10.1.2.3', '10.2.0.1',
           '2001:db8::1', '::1']
NUMBERS = [0, 1, 2.5, -1, 0.5, 3, 1e10, 0.000001]

RULES = st.one_of(
    st.sampled_from(['x', 'y', 'xy', '10.1.2.3']),
    st.sampled_from([0, 1, 2.5, -1, True, False, None]),
    st.builds(lambda p: {'prefix': p}, st.sampled_from(['x', '', 'xy', '1'])),
    st.builds(lambda p: {'suffix': p}, st.sampled_from(['y', 'x', ''])),
    st.builds(lambda p: {'equals-ignore-case': p},
              st.sampled_from(['x', 'XY', 'Yx'])),
    st.builds(lambda p: {'anything-but': p},
              st.sampled_from(['x', ['x', 'y'], 1, [0, 2.5],
                               {'prefix': 'x'}])),
    st.builds(lambda p: {'numeric': p},
              st.sampled_from([['>', 0], ['>=', 0, '<', 2], ['=', 1],
                               ['<', 2.5], ['<=', -1], ['>', -1, '<=', 0.5],
                               ['>=', 1000000]])),
    st.builds(lambda p: {'exists': p}, st.booleans()),
    st.builds(lambda p: {'cidr': p},
              st.sampled_from(['10.0.0.0/8', '10.1.0.0/16', '10.1.2.3/32',
                               '2001:db8::/32', '0.0.0.0/0'])),
)
RULE_LISTS = st.lists(RULES, min_size=1, max_size=3)
# Many distinct bounds, so that one key carries more ranges than
# RangeSet.SMALL.
NUMERIC_BOUNDS = st.one_of(
    st.builds(lambda op, n: [op, n], st.sampled_from(['>', '>=', '<', '<=',
                                                      '=']),
              st.sampled_from(NUMBERS[:-2] + [-2, 1.5, 2, 4, 0.25])),
    st.builds(lambda low, high: ['>', low, '<=', high],
              st.integers(-3, 2), st.integers(3, 6)))


def _valid(options):
    try:
        validate_options(options)
    except InvalidPolicy:
        return False
    return True


def _policy(keys, nested):
    leaves = st.dictionaries(keys, RULE_LISTS, min_size=1, max_size=3)
    if nested:
        node = st.recursive(leaves, lambda inner: st.dictionaries(
            keys, st.one_of(RULE_LISTS, inner), min_size=1, max_size=2),
            max_leaves=4)
    else:
        node = leaves
    with_or = st.builds(lambda base, branches: dict(base, **{'$or': branches}),
                        node, st.lists(node, min_size=1, max_size=3))
    return st.one_of(node, node, with_or)


ATTRIBUTE_POLICIES = st.builds(
    lambda p: {'filter_policy': p},
    _policy(st.sampled_from(['k1', 'k2']), False)).filter(_valid)
BODY_POLICIES = st.builds(
    lambda p: {'filter_policy': p, 'filter_policy_scope': 'MessageBody'},
    _policy(st.sampled_from(['a', 'b', 'a.b']), True)).filter(_valid)
BINDING_KEYS = st.lists(st.lists(st.sampled_from(WORDS + ['*', '#']),
                                 min_size=1, max_size=4).map('.'.join),
                        min_size=1, max_size=3)


OPTIONS = st.builds(
    lambda tags, keys, policy: dict(
        policy or {}, **({'filter_policies': tags} if tags is not None
                         else {}),
        **({'binding_keys': keys} if keys is not None else {})),
    st.one_of(st.none(), st.lists(TAGS, max_size=3)),
    st.one_of(st.none(), st.none(), BINDING_KEYS),
    st.one_of(st.none(), ATTRIBUTE_POLICIES, BODY_POLICIES),
).filter(_valid)

SCALARS = st.one_of(st.sampled_from(STRINGS), st.sampled_from(NUMBERS))
ATTRIBUTE_VALUES = st.one_of(
    SCALARS, st.lists(SCALARS, max_size=3),
    st.builds(lambda s: {'Type': 'String', 'Value': s},
              st.sampled_from(STRINGS)),
    st.builds(lambda n: {'Type': 'Number', 'Value': n},
              st.sampled_from(['1', '2.50', '-1', '1e3', '0.0000001'])),
    st.builds(lambda s: {'Type': 'String.Array', 'Value': s},
              st.sampled_from(['["x", 1]', '[true, null]', '[]', 'bad'])),
    st.just({'Type': 'Binary', 'Value': 'eA=='}),
)
BODY_VALUES = st.recursive(
    st.one_of(SCALARS, st.sampled_from([None, True, False])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(['a', 'b', 'a.b']), inner,
                        max_size=3)),
    max_leaves=8)
MESSAGES = st.fixed_dictionaries({}, optional={
    'filter_policies': st.lists(TAGS, max_size=3),
    'routing_key': st.lists(st.sampled_from(WORDS), min_size=1,
                            max_size=4).map('.'.join),
    'attributes': st.dictionaries(st.sampled_from(['k1', 'k2', 'k3']),
                                  ATTRIBUTE_VALUES, min_size=1, max_size=3),
    'body': st.one_of(BODY_VALUES, st.dictionaries(
        st.sampled_from(['a', 'b', 'a.b']), BODY_VALUES, max_size=3)),
})


def expected(subscriptions, message):
    view = MessageView(message)
    return {sub_id for sub_id, options in subscriptions.items()
            if parse_options(options).matches(view)}


class TestDifferential(unittest.TestCase):

    def check(self, options, messages):
        subscriptions = dict(enumerate(options))
        matcher = Matcher()
        for sub_id, sub_options in subscriptions.items():
            matcher.add(sub_id, sub_options)
        for message in messages:
            self.assertEqual(expected(subscriptions, message),
                             matcher.match(message), message)

    @SETTINGS
    @given(st.lists(st.one_of(
        st.builds(lambda t: {'filter_policies': t}, st.lists(TAGS)),
        st.builds(lambda k: {'binding_keys': k}, BINDING_KEYS)),
        min_size=1, max_size=25), st.lists(MESSAGES, min_size=1, max_size=8))
    def test_tags_and_binding_keys(self, options, messages):
        self.check(options, messages)

    @SETTINGS
    @given(st.lists(ATTRIBUTE_POLICIES, min_size=1, max_size=25),
           st.lists(st.fixed_dictionaries({'attributes': st.dictionaries(
               st.sampled_from(['k1', 'k2']), ATTRIBUTE_VALUES, min_size=1,
               max_size=2)}), min_size=1, max_size=8))
    def test_attribute_policies(self, options, messages):
        self.check(options, messages)

    @SETTINGS
    @given(st.lists(BODY_POLICIES, min_size=1, max_size=25),
           st.lists(st.fixed_dictionaries({'body': st.dictionaries(
               st.sampled_from(['a', 'b', 'a.b']), BODY_VALUES, min_size=1,
               max_size=3)}), min_size=1, max_size=8))
    def test_body_policies(self, options, messages):
        self.check(options, messages)

    @SETTINGS
    @given(st.lists(OPTIONS, min_size=1, max_size=25),
           st.lists(MESSAGES, min_size=1, max_size=8))
    def test_every_kind_together(self, options, messages):
        self.check(options, messages)

    @SETTINGS
    @given(st.lists(OPTIONS, min_size=2, max_size=25),
           st.lists(st.booleans(), min_size=25, max_size=25),
           st.lists(OPTIONS, min_size=1, max_size=5),
           st.lists(MESSAGES, min_size=1, max_size=5))
    def test_after_removals_and_replacements(self, options, removed,
                                             replacements, messages):
        subscriptions = dict(enumerate(options))
        matcher = Matcher()
        for sub_id, sub_options in subscriptions.items():
            matcher.add(sub_id, sub_options)
        for sub_id, gone in zip(list(subscriptions), removed):
            if gone:
                matcher.remove(sub_id)
                del subscriptions[sub_id]
        for sub_id, sub_options in enumerate(replacements):
            matcher.add(sub_id, sub_options)
            subscriptions[sub_id] = sub_options
        self.assertEqual(len(subscriptions), len(matcher))
        for message in messages:
            self.assertEqual(expected(subscriptions, message),
                             matcher.match(message), message)

    @SETTINGS
    @given(st.lists(st.builds(
        lambda bounds, extra: {'filter_policy': dict(
            {'n': [{'numeric': bound} for bound in bounds]}, **extra)},
        st.lists(NUMERIC_BOUNDS, min_size=1, max_size=2),
        st.sampled_from([{}, {'k1': ['x']}, {'k1': [{'prefix': 'x'}]},
                         {'k2': [{'exists': False}]}])).filter(_valid),
        min_size=10, max_size=40),
        st.lists(st.fixed_dictionaries({'attributes': st.dictionaries(
            st.sampled_from(['n', 'k1', 'k2']),
            st.one_of(st.sampled_from(NUMBERS + ['x', 'xy']),
                      st.lists(st.sampled_from(NUMBERS), max_size=3)),
            min_size=1, max_size=3)}), min_size=1, max_size=8))
    def test_many_numeric_ranges_on_one_key(self, options, messages):
        # Past RangeSet.SMALL ranges a key matcher uses the interval index.
        self.check(options, messages)

    @SETTINGS
    @given(st.lists(st.tuples(st.integers(0, 7),
                              st.one_of(st.none(), OPTIONS)),
                    min_size=1, max_size=30),
           st.lists(MESSAGES, min_size=1, max_size=3))
    def test_match_between_incremental_changes(self, operations, messages):
        # None removes the subscription; anything else adds or replaces it.
        subscriptions = {}
        matcher = Matcher()
        for sub_id, sub_options in operations:
            if sub_options is None:
                matcher.remove(sub_id)
                subscriptions.pop(sub_id, None)
            else:
                matcher.add(sub_id, sub_options)
                subscriptions[sub_id] = sub_options
            for message in messages:
                self.assertEqual(expected(subscriptions, message),
                                 matcher.match(message), message)
