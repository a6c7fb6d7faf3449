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
import unittest

from zaqar_filtering import InvalidPolicy
from zaqar_filtering.policy.message import flatten_body
from zaqar_filtering.policy.message import path_prefixes
from zaqar_filtering.policy.message import with_body_fields
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
