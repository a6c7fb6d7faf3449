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

"""What the store keeps of a subscription."""

import datetime
import unittest

from zaqar_filtering import InvalidPolicy
from zaqar_filtering.store.record import build_record
from zaqar_filtering.store.record import record_from_listing

UTC = datetime.timezone.utc
NOW = datetime.datetime(2026, 11, 22, 12, 0, 0, 500000, tzinfo=UTC)


class TestRecord(unittest.TestCase):

    def test_only_normalized_filter_options_are_kept(self):
        record = build_record('p', 'q', 7, 'http://x', {
            'filter_policies': ['b', 'a', 'b'], 'binding_keys': ['#'],
            'post_data': '{}', '_retry_policy': {'minimum_delay': 1}})
        self.assertEqual({'filter_policies': ['a', 'b'],
                          'binding_keys': ['#']}, record.policy)
        self.assertEqual(('binding_keys', 'tags'), record.kinds)
        self.assertEqual('7', record.subscription_id)
        self.assertEqual(('p', 'q', '7'), record.key)

    def test_a_subscription_without_policy_has_an_empty_record(self):
        record = build_record('p', 'q', 'id', 'http://x', None)
        self.assertEqual({}, record.policy)
        self.assertEqual((), record.kinds)

    def test_hash_depends_on_the_policy_not_its_spelling(self):
        one = build_record('p', 'q', 'a', 'http://x',
                           {'filter_policy': {'a': [1], 'b': ['x']}})
        two = build_record('p', 'q', 'b', 'http://y',
                           {'filter_policy': {'b': ['x'], 'a': [1]}})
        three = build_record('p', 'q', 'a', 'http://x',
                             {'filter_policy': {'a': [2], 'b': ['x']}})
        self.assertEqual(one.hash, two.hash)
        self.assertNotEqual(one.hash, three.hash)

    def test_invalid_options_raise(self):
        with self.assertRaises(InvalidPolicy) as caught:
            build_record('p', 'q', 'a', 'http://x',
                         {'binding_keys': ['a..b']})
        self.assertEqual('binding_keys', caught.exception.option)

    def test_listing_gives_expiry_in_whole_seconds(self):
        record = record_from_listing(
            'p', 'q', {'id': 'a', 'subscriber': 'http://x', 'ttl': 3600,
                       'age': 600, 'options': {}}, NOW)
        self.assertEqual(datetime.datetime(2026, 11, 22, 12, 50, 0,
                                           tzinfo=UTC), record.expires)

    def test_same_as_allows_a_second_of_age_rounding(self):
        def listed(age, now, options=None, subscriber='http://x'):
            return record_from_listing('p', 'q', {
                'id': 'a', 'subscriber': subscriber, 'ttl': 60, 'age': age,
                'options': options or {}}, now)
        first = listed(10, NOW)
        later = NOW + datetime.timedelta(seconds=5.7)
        self.assertTrue(first.same_as(listed(15, later)))
        self.assertFalse(first.same_as(listed(10, later)))
        self.assertFalse(first.same_as(
            listed(15, later, subscriber='http://y')))
        self.assertFalse(first.same_as(
            listed(15, later, {'filter_policies': ['t']})))
