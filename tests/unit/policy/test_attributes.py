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

"""SNS filter policies: limits at and past their boundary, bad input, and
matching rules the conformance corpus does not pin down."""

import json
import unittest

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import Limits
from zaqar_filtering import Matcher
from zaqar_filtering.policy.message import MessageView
from zaqar_filtering.policy.subscription import parse_options
from zaqar_filtering import validate_options

BODY = 'MessageBody'


def check(policy, scope='MessageAttributes', limits=None):
    options = {'filter_policy': policy, 'filter_policy_scope': scope}
    if limits is None:
        return validate_options(options)
    return validate_options(options, limits)


def rejection(policy, scope='MessageAttributes', limits=None):
    try:
        check(policy, scope, limits)
    except InvalidPolicy as exc:
        return exc
    raise AssertionError('accepted: %s' % json.dumps(policy)[:200])


class TestLimits(unittest.TestCase):

    def test_keys(self):
        five = {'k%d' % i: ['v'] for i in range(5)}
        check(five)
        exc = rejection(dict(five, k5=['v']))
        self.assertEqual('too_many_keys', exc.rule)
        self.assertIn('Filter policy can not have more than 5 keys; it has '
                      '6: k0, k1, k2, k3, k4, k5', str(exc))
        # Nested keys count as their full path; $or branches share a key.
        check({'a': {'x': ['1'], 'y': ['2']}, 'b': ['3'],
               '$or': [{'c': ['4']}, {'c': ['5'], 'd': ['6']}]}, BODY)
        self.assertEqual('too_many_keys', rejection(
            {'a': {'x': ['1'], 'y': ['2']}, 'b': ['3'],
             '$or': [{'c': ['4']}, {'d': ['5'], 'e': ['6']}]}, BODY).rule)

    def test_combinations(self):
        check({'k': list(range(150))})
        check({'a': list(range(15)), 'b': list(range(10))})
        exc = rejection({'k': list(range(151))})
        self.assertEqual('too_complex', exc.rule)
        self.assertIn('Filter policy is too complex: 151 value combinations;'
                      ' the limit is 150', str(exc))
        # Depth multiplies: 2 values at depth 3 count 6.
        check({'a': {'b': {'c': list(range(50))}}}, BODY)
        self.assertEqual('too_complex', rejection(
            {'a': {'b': {'c': list(range(51))}}}, BODY).rule)

    def test_huge_and_deep_policies_are_rejected_quickly(self):
        exc = rejection({'k': list(range(10 ** 6))},
                        limits=Limits(max_policy_bytes=10 ** 8))
        self.assertEqual('too_complex', exc.rule)
        deep = ['leaf']
        for _ in range(100000):
            deep = {'k': deep}
        self.assertEqual('too_complex', rejection(deep, BODY).rule)
        self.assertEqual('policy_bytes', rejection(
            {'k': list(range(10 ** 6))}).rule)

    def test_size_at_the_default_limit(self):
        # {"k":["..."]} is 10 bytes of JSON around the string.
        check({'k': ['x' * (256 * 1024 - 10)]})
        exc = rejection({'k': ['x' * (256 * 1024 - 9)]})
        self.assertEqual('filter_policy: the policy has 262145 bytes of '
                         'JSON; the limit is 262144', str(exc))

    def test_size(self):
        limits = Limits(max_policy_bytes=20)
        policy = {'k': ['x' * 10]}       # {"k":["xxxxxxxxxx"]} is 20 bytes
        check(policy, limits=limits)
        exc = rejection({'k': ['x' * 11]}, limits=limits)
        self.assertEqual('policy_bytes', exc.rule)
        self.assertEqual('filter_policy: the policy has 21 bytes of JSON; '
                         'the limit is 20', str(exc))

    def test_numbers(self):
        for good in (10 ** 9, -10 ** 9, 0.00001, 123456789.12345, 1e9, 7):
            with self.subTest(number=good):
                check({'k': [good]})
                check({'k': [{'numeric': ['=', good]}]})
                check({'k': [{'anything-but': good}]})
        table = [
            (10 ** 9 + 1, 'number_range', 'number 1000000001 is outside the '
             'range -1000000000 to 1000000000'),
            (-1e10, 'number_range', 'outside the range'),
            (0.000001, 'number_precision', 'number 1e-06 has 6 decimals; the'
             ' limit is 5'),
            (1.123456, 'number_precision', 'has 6 decimals'),
        ]
        for bad, rule, text in table:
            for policy in ({'k': [bad]}, {'k': [{'numeric': ['<', bad]}]},
                           {'k': [{'anything-but': [bad]}]}):
                with self.subTest(policy=policy):
                    exc = rejection(policy)
                    self.assertEqual(rule, exc.rule)
                    self.assertIn(text, str(exc))

    def test_non_finite_numbers(self):
        self.assertEqual('policy_type', rejection({'k': [float('nan')]}).rule)
        self.assertEqual('policy_type', rejection({'k': [float('inf')]}).rule)


class TestBadInput(unittest.TestCase):

    def test_table(self):
        table = [
            ('{"k": ["v"]}', 'policy_type', "filter_policy: must be a JSON "
             "object, not '{\"k\": [\"v\"]}'; give the policy itself, not its"
             " JSON text"),
            (['k'], 'policy_type', 'must be a JSON object, not ["k"]'),
            ({'k': 'v'}, 'not_object_or_array', 'filter_policy/k: "k" must be'
             " an object or an array, not 'v'"),
            ({'k': []}, 'empty_array', 'filter_policy/k: Empty arrays are not'
             ' allowed'),
            ({'k': [{}]}, 'match_expression', 'Empty objects are not allowed'),
            ({'k': [{'prefix': 'a', 'suffix': 'b'}]}, 'match_expression',
             'Only one key allowed in match expression'),
            ({'k': [{'Prefix': 'a'}]}, 'unknown_operator',
             'filter_policy/k/0: Unrecognized match type Prefix'),
            ({'k': [['v']]}, 'match_value', 'Match value must be String, '
             'number, true, false, or null, not ["v"]'),
            ({'k': [{'prefix': 1}]}, 'pattern_type',
             'filter_policy/k/0/prefix: prefix match pattern must be a '
             'string, not 1'),
            ({'k': [{'equals-ignore-case': None}]}, 'pattern_type',
             'equals-ignore-case match pattern must be a string, not null'),
            ({'k': [{'exists': 1}]}, 'pattern_type',
             'exists match pattern must be either true or false. Got 1'),
            ({'k': [{'anything-but': []}]}, 'empty_array',
             'Empty arrays are not allowed'),
            ({'k': [{'anything-but': [True]}]}, 'pattern_type',
             'Value of anything-but must be an array or single string/number '
             'value, not true'),
            ({'k': [{'anything-but': None}]}, 'pattern_type',
             'not null'),
            ({'k': [{'anything-but': {'prefix': ''}}]}, 'pattern_type',
             'anything-but prefix must not be empty'),
            ({'k': [{'anything-but': {'prefix': 'a', 'suffix': 'b'}}]},
             'match_expression', 'Only one key allowed in match expression'),
            ({'k': [{'numeric': ['>', 5, '<', 5]}]}, 'numeric_range',
             'Bottom must be less than top: 5 is not below 5'),
            ({'k': [{'numeric': ['>', True]}]}, 'numeric_syntax',
             'Value of > must be numeric, not true'),
            ({'k': [{'numeric': ['>=']}]}, 'numeric_syntax',
             'Value of >= must be numeric, but the expression ends after >='),
            ({'k': [{'cidr': '10.0.0.0/33'}]}, 'cidr',
             'mask bits must be at most 32 for 10.0.0.0'),
            ({'k': [{'cidr': '::/129'}]}, 'cidr', 'at most 128'),
            ({'k': [{'cidr': '10.0.0.0/-1'}]}, 'cidr',
             'mask bits must be an integer'),
            ({'$or': {'a': ['1']}}, 'or_type', 'filter_policy/$or: "$or" must'
             ' be a non-empty array of objects'),
            ({'$or': []}, 'or_type', 'non-empty array of objects, not []'),
            ({'$or': [{'a': ['1']}, ['b']]}, 'or_type',
             'filter_policy/$or/1: "$or" must be a non-empty array of '
             'objects, not ["b"]'),
            ({'$or': [{'a': ['1']}, {}]}, 'empty_object',
             'filter_policy/$or/1: Empty objects are not allowed'),
            ({1: ['v']}, 'key_type', 'key 1 is not a string'),
            ({'k': [{'prefix': {1, 2}}]}, 'policy_type', 'is not a JSON '
             'object'),
        ]
        for policy, rule, text in table:
            with self.subTest(policy=policy):
                exc = rejection(policy)
                self.assertEqual(rule, exc.rule)
                self.assertIn(text, str(exc))
                self.assertEqual('filter_policy', exc.option)

    def test_nesting_needs_body_scope(self):
        policy = {'a': ['x'], 'order': {'state': ['paid']}}
        exc = rejection(policy)
        self.assertEqual('nested_policy', exc.rule)
        self.assertEqual(('order',), exc.path)
        self.assertIn('set filter_policy_scope to MessageBody', str(exc))
        check(policy, BODY)
        self.assertEqual('empty_object', rejection({'a': {}}, BODY).rule)

    def test_scope(self):
        for bad in ('messagebody', 'Body', 1, ''):
            with self.subTest(scope=bad):
                exc = rejection({'k': ['v']}, bad)
                self.assertEqual('filter_policy_scope', exc.option)
                self.assertIn('must be "MessageAttributes" or "MessageBody"',
                              str(exc))

    def test_empty_policy_is_no_filter(self):
        self.assertEqual({}, validate_options({'filter_policy': {}}))
        self.assertEqual({}, validate_options({'filter_policy': None}))


def matched(policy, message, scope='MessageAttributes'):
    """Evaluate through the Matcher and alone; both must agree."""
    options = {'filter_policy': policy, 'filter_policy_scope': scope}
    matcher = Matcher()
    matcher.add('s', options)
    alone = parse_options(options).matches(MessageView(message))
    indexed = matcher.match(message) == {'s'}
    assert alone == indexed, (policy, message)
    return indexed


class TestSemantics(unittest.TestCase):

    def test_numbers_between_grid_points_compare_exactly(self):
        self.assertTrue(matched({'n': [{'numeric': ['>', 0]}]},
                                {'attributes': {'n': 0.000001}}))
        self.assertFalse(matched({'n': [{'numeric': ['<=', 0]}]},
                                 {'attributes': {'n': 0.000001}}))
        self.assertFalse(matched({'n': [{'numeric': ['=', 0]}]},
                                 {'attributes': {'n': 0.000001}}))
        self.assertTrue(matched({'n': [{'numeric': ['>', 1]}]}, {
            'attributes': {'n': {'Type': 'Number',
                                 'Value': '1.000000000000000000000000000001'}},
        }))
        self.assertTrue(matched({'n': [0.1]}, {'attributes': {'n': 0.1}}))
        self.assertTrue(matched({'n': [300]}, {'body': {'n': 300.0}}, BODY))

    def test_numbers_beyond_the_policy_range(self):
        self.assertTrue(matched({'n': [{'numeric': ['>', 100]}]},
                                {'attributes': {'n': 5e12}}))
        self.assertFalse(matched({'n': [{'numeric': ['<', 1e9]}]},
                                 {'attributes': {'n': 5e12}}))
        self.assertTrue(matched({'n': [{'numeric': ['<=', -1e9]}]},
                                {'attributes': {'n': -1e9}}))
        self.assertTrue(matched({'n': [{'numeric': ['<', -1e9]}]},
                                {'attributes': {'n': -1e300}}))

    def test_types_do_not_mix(self):
        self.assertFalse(matched({'n': [300]}, {'attributes': {'n': '300'}}))
        self.assertFalse(matched({'n': ['300']}, {'attributes': {'n': 300}}))
        self.assertFalse(matched({'n': [True]}, {'body': {'n': 1}}, BODY))
        self.assertFalse(matched({'n': [1]}, {'body': {'n': True}}, BODY))
        self.assertFalse(matched({'n': [{'numeric': ['>', 0]}]},
                                 {'attributes': {'n': '5'}}))

    def test_exists_and_null(self):
        body = {'a': None, 'b': [], 'c': {}, 'd': 0}
        for key, exists in (('a', False), ('b', False), ('c', False),
                            ('d', True), ('missing', False)):
            with self.subTest(key=key):
                self.assertEqual(exists, matched(
                    {key: [{'exists': True}]}, {'body': body}, BODY))
                self.assertEqual(not exists, matched(
                    {key: [{'exists': False}]}, {'body': body}, BODY))
        self.assertTrue(matched({'a': [None]}, {'body': body}, BODY))
        self.assertFalse(matched({'a': [{'anything-but': 'x'}]},
                                 {'body': body}, BODY))

    def test_anything_but_on_arrays_needs_one_other_element(self):
        policy = {'sport': [{'anything-but': ['rugby', 'tennis']}]}
        self.assertTrue(matched(policy, {'attributes': {
            'sport': ['rugby', 'baseball']}}))
        self.assertFalse(matched(policy, {'attributes': {
            'sport': ['rugby', 'tennis']}}))
        self.assertFalse(matched(policy, {'attributes': {}}))

    def test_equals_ignore_case_folds_unicode(self):
        self.assertTrue(matched({'s': [{'equals-ignore-case': 'STRASSE'}]},
                                {'attributes': {'s': 'stra\u00dfe'}}))

    def test_prefix_suffix_cidr(self):
        self.assertTrue(matched({'s': [{'prefix': ''}]},
                                {'attributes': {'s': 'x'}}))
        self.assertFalse(matched({'s': [{'prefix': 'abc'}]},
                                 {'attributes': {'s': 'ab'}}))
        self.assertTrue(matched({'s': [{'suffix': 'bc'}]},
                                {'attributes': {'s': 'abc'}}))
        self.assertTrue(matched({'ip': [{'cidr': '2001:db8::/32'}]},
                                {'attributes': {'ip': '2001:db8:1::7'}}))
        self.assertFalse(matched({'ip': [{'cidr': '10.0.0.0/8'}]},
                                 {'attributes': {'ip': '::ffff:10.0.0.1'}}))
        self.assertTrue(matched({'ip': [{'cidr': '10.1.2.3/32'}]},
                                {'attributes': {'ip': '10.1.2.3'}}))

    def test_attribute_forms(self):
        policy = {'k': ['v', 5]}
        for value, expected in (('v', True), (5, True), (['x', 'v'], True),
                                ({'Type': 'String', 'Value': 'v'}, True),
                                ({'Type': 'Number', 'Value': '5.0'}, True),
                                ({'Type': 'String.Array',
                                  'Value': '["x", 5]'}, True),
                                ({'Type': 'Binary', 'Value': 'dg=='}, False),
                                ({'Type': 'String.Array',
                                  'Value': "['v']"}, False),
                                ('w', False)):
            with self.subTest(value=value):
                self.assertEqual(expected, matched(
                    policy, {'attributes': {'k': value}}))

    def test_body_that_is_json_text(self):
        policy = {'a': {'b': ['c']}}
        self.assertTrue(matched(policy, {'body': '{"a": {"b": "c"}}'}, BODY))
        self.assertFalse(matched(policy, {'body': '"a.b"'}, BODY))
        self.assertFalse(matched(policy, {'body': 'not json'}, BODY))
        self.assertFalse(matched(policy, {'body': ['a', 'b', 'c']}, BODY))
        self.assertFalse(matched(policy, {}, BODY))

    def test_deep_bodies_do_not_break_matching(self):
        body = leaf = {}
        for _ in range(100000):
            leaf['a'] = {}
            leaf = leaf['a']
        leaf['x'] = 'y'
        self.assertFalse(matched({'x': ['y']}, {'body': body}, BODY))
        self.assertTrue(matched({'x': [{'exists': False}]}, {'body': body},
                                BODY))
