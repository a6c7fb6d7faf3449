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

"""validate_message: the filter fields a posted message may carry."""

import copy
import decimal
import unittest

from zaqar_filtering import InvalidPolicy
from zaqar_filtering.policy.message import flatten_body
from zaqar_filtering.policy.message import path_prefixes
from zaqar_filtering.policy.message import PathTree
from zaqar_filtering.policy.message import read_attributes
from zaqar_filtering.policy.message import with_body_fields
from zaqar_filtering.policy import values as v
from zaqar_filtering import validate_message


class TestValidateMessage(unittest.TestCase):

    def test_spec_example(self):
        self.assertEqual({'filter_policies': ['order_placed']},
                         validate_message({'body': 'test', 'filter_policies':
                                           ['order_placed']}))

    def test_fields_are_normalized_and_the_input_kept(self):
        message = {'body': {'x': 1}, 'ttl': 60,
                   'filter_policies': ['b', 'a', 'b'],
                   'routing_key': 'order.eu',
                   'attributes': {'price': 5, 'kind': 'book',
                                  'tags': ['a', 1],
                                  'typed': {'Type': 'Number',
                                            'Value': '-1.5e3'},
                                  'blob': {'Type': 'Binary', 'Value': 'AAE='}}}
        before = copy.deepcopy(message)
        self.assertEqual({'filter_policies': ['a', 'b'],
                          'routing_key': 'order.eu',
                          'attributes': message['attributes']},
                         validate_message(message))
        self.assertEqual(before, message)

    def test_no_filter_fields(self):
        self.assertEqual({}, validate_message({'body': 1}))
        self.assertEqual({}, validate_message({'filter_policies': [],
                                               'attributes': {},
                                               'routing_key': None}))

    def test_tag_limits_apply_to_messages(self):
        validate_message({'filter_policies': ['a' * 16] * 5})
        validate_message({'filter_policies': list('abcde')})
        for tags, text in ((['a' * 17], "tag '%s' has 17 characters; the "
                            'limit is 16' % ('a' * 17)),
                           (list('abcdef'), '6 tags; the limit is 5')):
            with self.subTest(tags=tags):
                with self.assertRaises(InvalidPolicy) as caught:
                    validate_message({'filter_policies': tags})
                self.assertIn('filter_policies: ' + text,
                              str(caught.exception))

    def test_bad_attributes(self):
        table = [
            ('nope', 'attributes_type', "attributes: must be an object of "
             "attribute names to values, not 'nope'"),
            ({'': 'x'}, 'attribute_name', "attribute name '' is not a "
             "non-empty string"),
            ({'k': True}, 'attribute_value', 'attributes/k: an attribute is '
             'a string, a number, a list or {"Type": ..., "Value": ...}, not '
             'true'),
            ({'k': None}, 'attribute_value', 'not null'),
            ({'k': float('nan')}, 'attribute_value', 'not NaN'),
            ({'k': ['a', {'b': 1}]}, 'attribute_value', 'attributes/k: a '
             'list attribute holds strings and numbers only'),
            ({'k': ['a', None]}, 'attribute_value', 'strings and numbers'),
            ({'k': {'Type': 'String'}}, 'attribute_value', 'exactly the keys '
             '"Type" and "Value", not ["Type"]'),
            ({'k': {'Type': 'Str', 'Value': 'x'}}, 'attribute_type',
             "Type must be one of String, Number, String.Array, Binary, not "
             "'Str'"),
            ({'k': {'Type': 'Number', 'Value': 5}}, 'attribute_value',
             'the Value of a Number attribute is a string, not 5'),
            ({'k': {'Type': 'Number', 'Value': 'five'}}, 'attribute_value',
             "the Value of a Number attribute is a number, not 'five'"),
            ({'k': {'Type': 'Number', 'Value': 'NaN'}}, 'attribute_value',
             'is a number'),
            ({'k': {'Type': 'Number', 'Value': '1_000'}}, 'attribute_value',
             'is a number'),
            ({'k': {'Type': 'String.Array', 'Value': "['a']"}},
             'attribute_value', 'the Value of a String.Array attribute is '
             'the JSON text of an array'),
            ({'k': {'Type': 'String.Array', 'Value': '{"a": 1}'}},
             'attribute_value', 'JSON text of an array'),
            ({'k': {'Type': 'String.Array', 'Value': '[["a"]]'}},
             'attribute_value', 'JSON text of an array'),
        ]
        for attributes, rule, text in table:
            with self.subTest(attributes=attributes):
                with self.assertRaises(InvalidPolicy) as caught:
                    validate_message({'attributes': attributes})
                self.assertIn(text, str(caught.exception))
                self.assertEqual('attributes', caught.exception.option)
                self.assertEqual(rule, caught.exception.rule)

    def test_message_must_be_an_object(self):
        for bad in ([], 'x', None):
            with self.subTest(message=bad):
                with self.assertRaises(InvalidPolicy) as caught:
                    validate_message(bad)
                self.assertEqual('message', caught.exception.option)


class TestFlattenBody(unittest.TestCase):

    def test_paths(self):
        body = {'a': {'b': 'x', 'c.d': [1, {'e': None}, [True]]},
                'f.g': {'h': []}, 'i': {}}
        self.assertEqual(
            {'a.b': (('s', 'x'),), 'a.c.d': (('n', 1), ('b', True)),
             'a.c.d.e': (('z', None),)},
            flatten_body(body))

    def test_wanted_paths_prune_the_walk(self):
        body = {'a': {'b': 'x', 'c': {'d': 1}}, 'a.c': {'d': 2}, 'z': 3}
        wanted = set(path_prefixes('a.c.d'))
        self.assertEqual(['a', 'a.c', 'a.c.d'], path_prefixes('a.c.d'))
        self.assertEqual({'a.c.d': (('n', 1), ('n', 2))},
                         {path: tuple(sorted(found)) for path, found in
                          flatten_body(body, wanted).items()})

    def test_agrees_with_a_recursive_reading(self):
        body = {'a': {'b': ['x', 1, {'c': 2.5}, [None, True]], 'c': 'y',
                      'd': {'e': {'f': 'z'}}, 'g': 7},
                'a.b': ['w', -1], 'h': [{'i': 'u'}, {'i': 'v', 'j': 0}],
                'k': None, 3: 'three', 'l': [], 'm': {}}
        paths = ['a.b', 'a.b.c', 'a.c', 'a.d.e.f', 'h.i', 'h.j', 'k', '3',
                 'x.y']
        wanted = {prefix for path in paths for prefix in path_prefixes(path)}
        for chosen in (None, wanted, set(path_prefixes('a.b'))):
            with self.subTest(wanted=chosen):
                expected = {
                    path: sorted(found, key=repr) for path, found
                    in reference_flatten(body, chosen).items()}
                found = flatten_body(body, chosen)
                self.assertTrue(all(type(f) is tuple for f in found.values()))
                self.assertEqual(expected, {
                    path: sorted(values, key=repr)
                    for path, values in found.items()})

    def test_empty_and_dotted_keys(self):
        body = {'': {'x': 1, '': {'y': 2}}, '.x': 3, 'a': {'': 4, '.b': 5,
                'b': {'': 6}}, 'a.': {'.b': 7}, 'a..b': 8, 'x': 9, 'y': 10}
        paths = ['', '.x', 'x', 'y', 'a.', 'a..b', 'a.b.', 'z.']
        wanted = {prefix for path in paths for prefix in path_prefixes(path)}
        expected = {path: sorted(values) for path, values
                    in reference_flatten(body, wanted).items()}
        self.assertEqual({'.x', 'x', 'y', 'a.', 'a..b', 'a.b.'},
                         set(expected))
        for given in (wanted, PathTree(wanted)):
            self.assertEqual(expected, {
                path: sorted(values) for path, values
                in flatten_body(body, given).items()})

    def test_array_values_keep_their_order(self):
        self.assertEqual(
            {'a': (('s', 'x'), ('n', 1), ('s', 'y'))},
            flatten_body({'a': ['x', 1, 'y']}))
        self.assertEqual(
            {'a': (('s', 'x'), ('s', 'y')), 'a.b': (('n', 1),)},
            flatten_body({'a': ['x', {'b': 1}, 'y']}))

    def test_json_text_and_other_bodies(self):
        self.assertEqual({'a': (('n', 1),)}, flatten_body('{"a": 1}'))
        for body in ('[1]', 'nope', [{'a': 1}], 3, None):
            with self.subTest(body=body):
                self.assertEqual({}, flatten_body(body))


def reference_flatten(body, wanted=None):
    """flatten_body's contract, read recursively (values as lists)."""
    fields = {}

    def visit(path, node):
        if isinstance(node, dict):
            for key, value in node.items():
                child = '%s.%s' % (path, key) if path else str(key)
                if wanted is None or child in wanted:
                    visit(child, value)
        elif isinstance(node, list):
            for item in node:
                visit(path, item)
        else:
            value = v.from_json(node)
            if value is not None:
                fields.setdefault(path, []).append(value)

    visit('', body)
    return fields


class TestReadAttributes(unittest.TestCase):

    def test_typed_and_plain_attributes(self):
        self.assertEqual({
            'a': (('s', 'x'),), 'b': (('s', '10'),),
            'c': (('n', decimal.Decimal('10')),),
            'd': (('n', decimal.Decimal('-1.5E+3')),),
            'e': (('s', 'x'), ('n', decimal.Decimal(1))),
            'f': (('b', True), ('z', None)), 'g': (('n', 2),)},
            read_attributes({'attributes': {
                'a': 'x', 'b': {'Type': 'String', 'Value': '10'},
                'c': {'Type': 'Number', 'Value': '10'},
                'd': {'Value': '-1.5e3', 'Type': 'Number'},
                'e': ['x', 1],
                'f': {'Type': 'String.Array', 'Value': '[true, null]'},
                'g': 2,
                'h': {'Type': 'Binary', 'Value': 'eA=='}}}))

    def test_malformed_attributes_are_skipped(self):
        malformed = [
            {'Type': 'Number', 'Value': 'ten'},
            {'Type': 'Number', 'Value': 'NaN'},
            {'Type': 'Number', 'Value': 10},
            {'Type': 'String', 'Value': None},
            {'Type': 'String', 'Value': 'x', 'Extra': 1},
            {'Type': 'String'},
            {'Value': 'x', 'Tipe': 'String'},
            {'Type': 'Strange', 'Value': 'x'},
            {'x': 1}, [{'x': 1}], None]
        for value in malformed:
            with self.subTest(value=value):
                self.assertEqual({}, read_attributes(
                    {'attributes': {'k': value}}))
                with self.assertRaises(InvalidPolicy):
                    validate_message({'attributes': {'k': value}})
        for name in ('', 1, None):
            with self.subTest(name=name):
                self.assertEqual({}, read_attributes(
                    {'attributes': {name: 'x'}}))

    def test_only_the_names_asked_for(self):
        message = {'attributes': {'a': 'x', 'b': {'Type': 'Number',
                                                  'Value': '1'}, 'c': 'y'}}
        self.assertEqual({'a': (('s', 'x'),)},
                         read_attributes(message, {'a': 1, 'z': 1}))
        self.assertEqual({}, read_attributes({'attributes': 'x'}, {'a'}))


class TestBodyFields(unittest.TestCase):

    def test_fields_in_the_body_are_moved_beside_it(self):
        message = {'ttl': 60, 'body': {'_filtering': {
            'filter_policies': ['b', 'a'], 'routing_key': 'x.y'}, 'n': 1}}
        before = copy.deepcopy(message)
        self.assertEqual(dict(before, filter_policies=['a', 'b'],
                              routing_key='x.y'), with_body_fields(message))
        self.assertEqual(before, message)

    def test_messages_without_them_are_returned_as_they_are(self):
        for message in ({'body': 'text'}, {'body': {'n': 1}}, {},
                        {'body': {'n': 1}, 'routing_key': 'a'}):
            with self.subTest(message=message):
                self.assertIs(message, with_body_fields(message))

    def test_bad_input(self):
        table = [
            ({'body': {'_filtering': ['a']}}, 'body_fields_type',
             'body/_filtering: must be an object of filter fields, not '
             '["a"]'),
            ({'body': {'_filtering': {'tags': ['a']}}}, 'body_fields_unknown',
             "body/_filtering: unknown field 'tags'; the filter fields are "
             'filter_policies, routing_key, attributes'),
            ({'routing_key': 'a', 'body': {'_filtering': {}}},
             'body_fields_twice', 'body/_filtering: filter fields are given '
             'in the body and beside it (routing_key); give them once'),
            ({'body': {'_filtering': {'filter_policies': ['a' * 17]}}},
             'tag_length', "body/_filtering/filter_policies: tag '%s' has 17 "
             'characters; the limit is 16' % ('a' * 17)),
            ({'body': {'_filtering': {'attributes': {'k': True}}}},
             'attribute_value', 'body/_filtering/attributes/k: an attribute '
             'is a string'),
        ]
        for message, rule, text in table:
            with self.subTest(message=message):
                with self.assertRaises(InvalidPolicy) as caught:
                    with_body_fields(message)
                self.assertIn(text, str(caught.exception))
                self.assertEqual(rule, caught.exception.rule)
