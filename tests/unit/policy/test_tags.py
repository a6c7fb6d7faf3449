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

"""Tag lists: limits at their boundary, one past it, and wrong types."""

import unittest

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import Limits
from zaqar_filtering import validate_options


class TestTags(unittest.TestCase):

    def test_good(self):
        table = [
            (['order_placed'], ['order_placed']),
            (['a' * 16], ['a' * 16]),                       # longest
            (['\u82f9' * 16], ['\u82f9' * 16]),             # characters
            (['e', 'd', 'c', 'b', 'a'], ['a', 'b', 'c', 'd', 'e']),
            (['a', 'b', 'a', 'b', 'c', 'd', 'e'], ['a', 'b', 'c', 'd', 'e']),
            (['with space', 'UPPER'], ['UPPER', 'with space']),
        ]
        for given, normalized in table:
            with self.subTest(given=given):
                self.assertEqual(
                    {'filter_policies': normalized},
                    validate_options({'filter_policies': given}))

    def test_empty_or_null_is_no_filter(self):
        for given in ([], None):
            with self.subTest(given=given):
                self.assertEqual({}, validate_options(
                    {'filter_policies': given}))

    def test_bad(self):
        table = [
            (['abcdefghijklmnopq'], 'tag_length',
             "filter_policies: tag 'abcdefghijklmnopq' has 17 characters; "
             "the limit is 16"),
            ([''], 'tag_length', "filter_policies: tag '' is empty; a tag "
             "has 1 to 16 characters"),
            (['a', 'b', 'c', 'd', 'e', 'f'], 'tags_count',
             'filter_policies: 6 tags; the limit is 5'),
            (['bad\ttab'], 'tag_control_character',
             "filter_policies: tag 'bad\\ttab' contains the control "
             "character U+0009"),
            (['nul\x00'], 'tag_control_character',
             "filter_policies: tag 'nul\\x00' contains the control "
             "character U+0000"),
            ('apple', 'tags_type',
             "filter_policies: must be a list of tags, not 'apple'"),
            ({'apple': 1}, 'tags_type',
             'filter_policies: must be a list of tags, not {"apple": 1}'),
            ([7], 'tag_type', 'filter_policies: tag 7 is not a string'),
            ([['a']], 'tag_type', 'filter_policies: tag ["a"] is not a '
             'string'),
            ([None], 'tag_type', 'filter_policies: tag null is not a string'),
        ]
        for given, rule, message in table:
            with self.subTest(given=given):
                with self.assertRaises(InvalidPolicy) as caught:
                    validate_options({'filter_policies': given})
                self.assertEqual(message, str(caught.exception))
                self.assertEqual(rule, caught.exception.rule)
                self.assertEqual('filter_policies', caught.exception.option)

    def test_configured_limits(self):
        limits = Limits(max_tags=2, max_tag_length=3)
        validate_options({'filter_policies': ['abc', 'de']}, limits)
        with self.assertRaises(InvalidPolicy) as caught:
            validate_options({'filter_policies': ['abcd']}, limits)
        self.assertIn('the limit is 3', str(caught.exception))
        with self.assertRaises(InvalidPolicy) as caught:
            validate_options({'filter_policies': ['a', 'b', 'c']}, limits)
        self.assertIn('3 tags; the limit is 2', str(caught.exception))

    def test_limits_must_be_positive_integers(self):
        for bad in (0, -1, 1.5, '5', True):
            with self.subTest(bad=bad):
                with self.assertRaises(ValueError):
                    Limits(max_tags=bad)
