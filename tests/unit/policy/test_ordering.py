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

"""Ordered queues: the queue flag and the ordering_key of a message."""

import unittest

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import Limits
from zaqar_filtering.policy.message import with_body_fields
from zaqar_filtering.policy import ordering
from zaqar_filtering import validate_message


class TestOrderingKey(unittest.TestCase):

    def test_good_keys_are_kept(self):
        for key in ('a', 'order-42', 'k' * 128, 'ключ ü 🎉', ' spaced '):
            with self.subTest(key=key):
                self.assertEqual({'ordering_key': key},
                                 validate_message({'body': 1,
                                                   'ordering_key': key}))

    def test_absent_or_null_key_is_no_key(self):
        self.assertEqual({}, validate_message({'body': 1}))
        self.assertEqual({}, validate_message({'ordering_key': None}))

    def test_bad_keys_name_the_field_and_the_rule(self):
        cases = (
            ('', 'ordering_key_length', "ordering_key: is empty; an "
             'ordering key has 1 to 128 characters'),
            ('k' * 129, 'ordering_key_length', "ordering_key: '%s...' has "
             '129 characters; the limit is 128' % ('k' * 40)),
            (7, 'ordering_key_type', 'ordering_key: must be a string, not 7'),
            (['a'], 'ordering_key_type',
             'ordering_key: must be a string, not ["a"]'),
            ({'a': 1}, 'ordering_key_type',
             'ordering_key: must be a string, not {"a": 1}'),
            (True, 'ordering_key_type',
             'ordering_key: must be a string, not true'),
            ('a\nb', 'ordering_key_control_character',
             "ordering_key: 'a\\nb' contains the control character U+000A"),
            ('a\x7f', 'ordering_key_control_character',
             "ordering_key: 'a\\x7f' contains the control character U+007F"),
        )
        for key, rule, text in cases:
            with self.subTest(key=key):
                with self.assertRaises(InvalidPolicy) as caught:
                    validate_message({'body': 1, 'ordering_key': key})
                self.assertEqual(rule, caught.exception.rule)
                self.assertEqual(text, str(caught.exception))

    def test_the_length_limit_is_configurable(self):
        limits = Limits(max_ordering_key_length=3)
        validate_message({'ordering_key': 'abc'}, limits)
        with self.assertRaises(InvalidPolicy) as caught:
            validate_message({'ordering_key': 'abcd'}, limits)
        self.assertIn('the limit is 3', str(caught.exception))

    def test_not_accepted_inside_the_body(self):
        # Only the HTTP layer stores keys; inside the body it would be lost.
        with self.assertRaises(InvalidPolicy) as caught:
            with_body_fields({'body': {'_filtering': {'ordering_key': 'k'}}})
        self.assertEqual('body_fields_unknown', caught.exception.rule)


class TestQueueFlag(unittest.TestCase):

    def test_booleans_and_absence_are_valid(self):
        for metadata in (None, {}, {'_ordered_by_key': True},
                         {'_ordered_by_key': False, 'x': 1}):
            with self.subTest(metadata=metadata):
                ordering.check_queue_metadata(metadata)

    def test_other_values_are_refused(self):
        for value, shown in ((1, '1'), ('true', "'true'"), (None, 'null'),
                             ([True], '[true]')):
            with self.subTest(value=value):
                with self.assertRaises(InvalidPolicy) as caught:
                    ordering.check_queue_metadata({'_ordered_by_key': value})
                self.assertEqual('_ordered_by_key: must be true or false, '
                                 'not %s' % shown, str(caught.exception))

    def test_is_ordered_only_for_true(self):
        self.assertTrue(ordering.is_ordered({'_ordered_by_key': True}))
        for metadata in (None, {}, {'_ordered_by_key': False},
                         {'_ordered_by_key': 1}):
            with self.subTest(metadata=metadata):
                self.assertFalse(ordering.is_ordered(metadata))
