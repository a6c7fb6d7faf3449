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

"""The policy automaton: every operator, $or, body nesting, shared states,
and add / remove / replace leaving exactly the states still in use."""

import unittest

from zaqar_filtering.index.automaton import conjunctions
from zaqar_filtering.index.automaton import PolicyAutomaton
from zaqar_filtering.index.interval_index import NumberGrid
from zaqar_filtering import Matcher
from zaqar_filtering.policy.attributes import parse_filter_policy
from zaqar_filtering.policy.limits import DEFAULT_LIMITS
from zaqar_filtering.policy.message import flatten_body
from zaqar_filtering.policy.message import read_attributes


def attributes_policy(policy):
    return parse_filter_policy(policy, 'MessageAttributes', DEFAULT_LIMITS)


def body_policy(policy):
    return parse_filter_policy(policy, 'MessageBody', DEFAULT_LIMITS)


def new_automaton():
    return PolicyAutomaton(NumberGrid(DEFAULT_LIMITS.max_policy_number,
                                      DEFAULT_LIMITS.max_policy_decimals))


def states(automaton):
    """Every state below the root."""
    found, stack = [], [automaton.root]
    while stack:
        state = stack.pop()
        for matcher in state.edges.values():
            for child in matcher.children.values():
                found.append(child)
                stack.append(child)
    return found


def matching(automaton, attributes):
    out = set()
    automaton.find(read_attributes({'attributes': attributes}), out)
    return out


class TestOperators(unittest.TestCase):
    """Each operator alone, against values that do and do not match."""

    CASES = [
        (['paid'], ['paid', ['x', 'paid']], ['Paid', 1, ['x']]),
        ([10], [10, {'Type': 'Number', 'Value': '10.0'}], ['10', 11]),
        ([{'prefix': 'ord'}], ['order', 'ord'], ['or', 'word', 5]),
        ([{'suffix': '.png'}], ['a.png', ['b', 'c.png']], ['a.jpg', 'png']),
        ([{'equals-ignore-case': 'PaId'}], ['paid', 'PAID'], ['pay']),
        ([{'anything-but': ['a', 'b']}], ['c', 3, ['a', 'c']],
         ['a', ['a', 'b']]),
        ([{'anything-but': 5}], [4, 'x'],
         [5, {'Type': 'Number', 'Value': '5.0'}]),
        ([{'anything-but': {'prefix': 'tmp'}}], ['file', 'tm'],
         ['tmp1', 3]),
        ([{'numeric': ['>', 0, '<=', 5]}], [5, 0.1, [7, 1]],
         [0, 5.00001, '3']),
        ([{'numeric': ['=', 2.5]}], [2.5], [2.50001, 2]),
        ([{'numeric': ['<', -1]}], [-2, -1e9], [-1, 0]),
        ([{'cidr': '10.1.0.0/16'}], ['10.1.2.3'], ['10.2.0.1', 'x', 10]),
        ([{'cidr': '2001:db8::/32'}], ['2001:db8::1'], ['::1', '10.1.2.3']),
        ([{'exists': True}], ['x', 0, ['y']], [[]]),
    ]

    def test_each_operator(self):
        for rules, accepted, rejected in self.CASES:
            automaton = new_automaton()
            automaton.add('s', attributes_policy({'k': rules}))
            for value in accepted:
                with self.subTest(rules=rules, value=value):
                    self.assertEqual({'s'}, matching(automaton, {'k': value}))
            for value in rejected:
                with self.subTest(rules=rules, value=value):
                    self.assertEqual(set(), matching(automaton, {'k': value}))

    def test_exists_false(self):
        automaton = new_automaton()
        automaton.add('s', attributes_policy({'k': [{'exists': False}],
                                              'j': ['x']}))
        self.assertEqual({'s'}, matching(automaton, {'j': 'x'}))
        self.assertEqual({'s'}, matching(automaton, {'j': 'x', 'k': []}))
        self.assertEqual(set(), matching(automaton, {'j': 'x', 'k': 'v'}))
        self.assertEqual(set(), matching(automaton, {}))

    def test_exists_false_or_a_value(self):
        automaton = new_automaton()
        automaton.add('s', attributes_policy(
            {'k': [{'exists': False}, 'v'], 'j': ['x']}))
        self.assertEqual({'s'}, matching(automaton, {'j': 'x'}))
        self.assertEqual({'s'}, matching(automaton, {'j': 'x', 'k': 'v'}))
        self.assertEqual(set(), matching(automaton, {'j': 'x', 'k': 'w'}))

    def test_many_ranges_on_one_key_use_the_interval_index(self):
        automaton = new_automaton()
        for bound in range(40):
            automaton.add(bound, attributes_policy(
                {'price': [{'numeric': ['>', bound]}]}))
        self.assertIsNotNone(automaton.root.edges['price'].ranges.tree)
        self.assertEqual(set(range(10)), matching(automaton, {'price': 10}))
        for bound in range(4, 40):
            automaton.discard(bound, attributes_policy(
                {'price': [{'numeric': ['>', bound]}]}))
        self.assertIsNone(automaton.root.edges['price'].ranges.tree)
        self.assertEqual(set(range(4)), matching(automaton, {'price': 10}))


class TestOneKeyAgreesWithEvaluation(unittest.TestCase):
    """Many rules on one key agree with evaluating each policy.

    The walk inlines prefixes by length, numeric bounds and the rarer
    string rules beside prefixes; a table of values checks them all.
    """

    RULES = [
        'c1/', {'prefix': 'c'}, {'prefix': 'c1/'}, {'prefix': 'c1/shoes'},
        {'prefix': ''}, {'suffix': '/9'}, {'equals-ignore-case': 'C1/X'},
        {'cidr': '10.1.0.0/16'}, {'anything-but': ['c1/x', 5]},
        {'anything-but': {'prefix': 'c1'}}, {'exists': True}, 10,
        {'numeric': ['>', 0]}, {'numeric': ['>=', 10, '<', 20]},
        {'numeric': ['>', 10, '<=', 20]}, {'numeric': ['<', -1]},
        {'numeric': ['<=', 0]}, {'numeric': ['=', 2.5]},
        {'numeric': ['>=', 1e9]},
    ]
    VALUES = [
        'c', 'c1', 'c1/', 'c1/shoes/9', 'C1/x', 'c1/x', 'd', '', '10.1.2.3',
        0, -1, -2, 2.5, 10, 10.00001, 19.99999, 20, 1e9, 5,
        {'Type': 'Number', 'Value': '10.0'}, {'Type': 'String', 'Value': '10'},
        {'Type': 'String.Array', 'Value': '[true, null]'},
        {'Type': 'String.Array', 'Value': '[null]'},
        ['c1/', 'c1/shoes'], [10, 15], ['x', 20, 'c'], [], [5, 'c1/x'],
    ]

    def check(self, rules):
        automaton = new_automaton()
        policies = {number: attributes_policy({'k': [rule], 'j': ['x']})
                    for number, rule in enumerate(rules)}
        for number, policy in policies.items():
            automaton.add(number, policy)
        for value in self.VALUES:
            attributes = {'j': 'x', 'k': value}
            fields = read_attributes({'attributes': attributes})
            with self.subTest(rules=len(rules), value=value):
                self.assertEqual(
                    {number for number, policy in policies.items()
                     if policy.matches(fields)},
                    matching(automaton, attributes))
        return automaton

    def test_rules_one_by_one(self):
        for rule in self.RULES:
            self.check([rule])

    def test_all_rules_on_one_key(self):
        automaton = self.check(self.RULES)
        # Its 7 ranges are compared one by one, without the interval index.
        matcher = automaton.root.edges['j'].exact[('s', 'x')].edges['k']
        self.assertEqual(7, len(matcher.bounds))
        self.assertIsNone(matcher.ranges.tree)

    def test_numeric_bounds_past_and_back_below_the_small_limit(self):
        ranges = [{'numeric': ['>', bound, '<=', bound + 15]}
                  for bound in range(-5, 25, 2)]
        automaton = new_automaton()
        policies = {}
        for number, rule in enumerate(ranges):
            policies[number] = attributes_policy({'k': [rule]})
            automaton.add(number, policies[number])
        matcher = automaton.root.edges['k']
        self.assertIsNotNone(matcher.ranges.tree)
        self.assertIsNone(matcher.bounds)
        for number in list(policies)[3:]:
            automaton.discard(number, policies.pop(number))
        self.assertIsNone(matcher.ranges.tree)
        self.assertEqual(3, len(matcher.bounds))
        for value in range(-6, 26):
            fields = read_attributes({'attributes': {'k': value}})
            with self.subTest(value=value):
                self.assertEqual(
                    {number for number, policy in policies.items()
                     if policy.matches(fields)},
                    matching(automaton, {'k': value}))

    def test_several_values_reaching_one_state(self):
        # Two values of one key take the same step, and the steps after it
        # still see every value of their own keys.
        automaton = new_automaton()
        automaton.add('s', attributes_policy(
            {'k': [{'prefix': 'a'}], 'n': [{'numeric': ['>', 1]}]}))
        automaton.add('t', attributes_policy(
            {'k': [{'prefix': 'a'}], 'n': [{'numeric': ['>', 5]}]}))
        self.assertEqual({'s', 't'}, matching(
            automaton, {'k': ['ab', 'ac', 'b'], 'n': [2, 3, 7]}))
        self.assertEqual({'s'}, matching(
            automaton, {'k': ['ab', 'ac'], 'n': [2, 3]}))
        self.assertEqual(set(), matching(
            automaton, {'k': ['b', 'c'], 'n': [2, 7]}))


class TestStructure(unittest.TestCase):

    def test_equal_leading_conditions_share_states(self):
        automaton = new_automaton()
        for number in range(100):
            automaton.add(number, attributes_policy({
                'event': ['type%d' % (number % 10)],
                'price': [{'numeric': ['>', number % 10]}]}))
        # One state per event value, one per (event value, bound).
        self.assertEqual(20, len(states(automaton)))
        self.assertEqual(set(range(3, 100, 10)), matching(
            automaton, {'event': 'type3', 'price': 3.5}))

    def test_selective_conditions_come_first(self):
        policy = attributes_policy({'a': [{'exists': False}],
                                    'b': [{'anything-but': 'x'}],
                                    'c': [{'exists': True}],
                                    'd': [{'prefix': 'p'}],
                                    'e': ['v']})
        first, = conjunctions(policy.branches[0])
        self.assertEqual(['e', 'd', 'c', 'b', 'a'],
                         [path for path, _ in first])

    def test_values_of_one_key_are_steps_of_their_own(self):
        # The value "2" leads to one state, whichever policy lists it.
        automaton = new_automaton()
        automaton.add('A', attributes_policy({'k': ['1', '2'], 'z': ['a']}))
        automaton.add('B', attributes_policy({'k': ['2', '3'], 'z': ['a']}))
        self.assertEqual(3, len(automaton.root.edges['k'].children))
        self.assertEqual(6, len(states(automaton)))
        self.assertEqual({'A', 'B'}, matching(automaton, {'k': '2',
                                                          'z': 'a'}))

    def test_a_value_of_one_condition_does_not_advance_another(self):
        # Both start on the key "k", with different rules.
        automaton = new_automaton()
        automaton.add('A', attributes_policy({'k': ['1', '2'], 'z': ['a']}))
        automaton.add('B', attributes_policy({'k': ['2'], 'z': ['b']}))
        self.assertEqual({'A'}, matching(automaton, {'k': '1', 'z': 'a'}))
        self.assertEqual(set(), matching(automaton, {'k': '1', 'z': 'b'}))
        self.assertEqual({'B'}, matching(automaton, {'k': '2', 'z': 'b'}))

    def test_or_branches(self):
        automaton = new_automaton()
        automaton.add('s', attributes_policy(
            {'k': ['x'], '$or': [{'a': ['1']}, {'b': [{'prefix': 'p'}]}]}))
        self.assertEqual({'s'}, matching(automaton, {'k': 'x', 'a': '1'}))
        self.assertEqual({'s'}, matching(automaton, {'k': 'x', 'b': 'pq'}))
        self.assertEqual(set(), matching(automaton, {'k': 'y', 'a': '1'}))
        self.assertEqual(set(), matching(automaton, {'k': 'x', 'a': '2'}))

    def test_body_scope_nesting(self):
        automaton = new_automaton()
        automaton.add('s', body_policy({'order': {
            'customer': {'tier': ['gold']},
            'items': {'sku': [{'prefix': 'b'}]}}}))
        body = {'order': {'customer': {'tier': 'gold'},
                          'items': [{'sku': 'a1'}, {'sku': 'b2'}]}}
        out = set()
        automaton.find(flatten_body(body, automaton.paths), out)
        self.assertEqual({'s'}, out)
        body['order']['items'] = [{'sku': 'a1'}]
        out = set()
        automaton.find(flatten_body(body, automaton.paths), out)
        self.assertEqual(set(), out)


class TestAddRemove(unittest.TestCase):

    POLICIES = [
        {'k': ['x'], 'n': [{'numeric': ['>', 1]}]},
        {'k': ['x'], 'n': [{'numeric': ['>', 1]}], 'z': [{'exists': False}]},
        {'k': ['x', 'y'], '$or': [{'a': ['1']}, {'a': ['1'], 'b': ['2']}]},
        {'c': [{'cidr': '10.0.0.0/8'}, {'suffix': 'z'}],
         'd': [{'anything-but': {'prefix': 'x'}}]},
        {'n': [{'numeric': ['>', 0]}, {'numeric': ['>=', 0]}]},
    ]

    def test_removing_everything_leaves_an_empty_automaton(self):
        automaton = new_automaton()
        for number, policy in enumerate(self.POLICIES * 3):
            automaton.add(number, attributes_policy(policy))
        for number, policy in enumerate(self.POLICIES * 3):
            automaton.discard(number, attributes_policy(policy))
        self.assertEqual({}, automaton.root.edges)
        self.assertIsNone(automaton.root.absent)
        self.assertEqual({}, automaton.paths)
        self.assertFalse(automaton)

    def test_removal_keeps_the_states_others_use(self):
        automaton = new_automaton()
        automaton.add('A', attributes_policy(self.POLICIES[0]))
        automaton.add('B', attributes_policy(self.POLICIES[1]))
        automaton.discard('B', attributes_policy(self.POLICIES[1]))
        self.assertEqual(2, len(states(automaton)))
        self.assertEqual({'A'}, matching(automaton, {'k': 'x', 'n': 2,
                                                     'z': 'v'}))
        self.assertIsNone(automaton.root.edges['k'].children[
            attributes_policy(self.POLICIES[0]).branches[0][0].rules[0]]
            .edges['n'].absent)

    def test_overlapping_ranges_of_one_condition(self):
        automaton = new_automaton()
        policy = attributes_policy(self.POLICIES[4])
        automaton.add('s', policy)
        self.assertEqual({'s'}, matching(automaton, {'n': 0}))
        automaton.discard('s', policy)
        self.assertEqual(set(), matching(automaton, {'n': 0}))
        self.assertFalse(automaton)

    def test_matcher_replace(self):
        matcher = Matcher()
        matcher.add('s', {'filter_policy': {'k': ['x']}})
        matcher.add('s', {'filter_policy': {'k': ['y']},
                          'filter_policy_scope': 'MessageBody'})
        self.assertEqual(set(), matcher.match({'attributes': {'k': 'x'}}))
        self.assertEqual({'s'}, matcher.match({'body': {'k': 'y'}}))
        self.assertFalse(matcher._attributes)
        matcher.remove('s')
        self.assertFalse(matcher._body)
        self.assertEqual({}, matcher._body.paths)
