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

"""Misspelled option and message field names are rejected; others kept."""

import itertools
import unittest

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import Matcher
from zaqar_filtering.policy import spelling
from zaqar_filtering import validate_message
from zaqar_filtering import validate_options

#: The keys Zaqar itself reads or writes in a subscription's options, a
#: _retry_policy, a queue's metadata and a posted message: never flagged.
ZAQAR_KEYS = (
    'post_data', 'post_headers', 'from', 'subject', 'trust_id',
    'trust_expires', '_retry_policy', 'retries_with_no_delay',
    'minimum_delay_retries', 'minimum_delay', 'maximum_delay',
    'maximum_delay_retries', 'retry_backoff_function',
    'ignore_subscription_override', '_max_claim_count',
    '_dead_letter_queue', '_dead_letter_queue_messages_ttl',
    '_default_message_ttl', '_default_message_delay',
    '_max_messages_post_size', '_enable_encrypt_messages', '_flavor',
    'body', 'ttl', 'delay', 'checksum',
    # Other names of ours (ordered queues, topics).
    '_ordered_by_key', 'queue',
)


class TestOptions(unittest.TestCase):

    def reason(self, options):
        with self.assertRaises(InvalidPolicy) as caught:
            validate_options(options)
        return caught.exception

    def test_misspelled_options_are_rejected_with_the_likely_name(self):
        for key, meant in [('filter_policie', 'filter_policies'),
                           ('Filter_Policies', 'filter_policies'),
                           ('filter-policies', 'filter_policies'),
                           ('filtre_policies', 'filter_policies'),
                           ('binding_key', 'binding_keys'),
                           ('bindingkeys', 'binding_keys'),
                           ('filter_polcy', 'filter_policy'),
                           ('filter_policy_scop', 'filter_policy_scope'),
                           ('_retry_polciy', '_retry_policy'),
                           ('retry_policy', '_retry_policy')]:
            error = self.reason({key: ['x']})
            self.assertEqual(key, error.option)
            self.assertEqual('option_name', error.rule)
            self.assertIn("did you mean '%s'" % meant, str(error))

    def test_a_key_close_to_two_names_lists_both_closest_first(self):
        error = self.reason({'filter_policys': ['typo']})
        self.assertEqual(
            "filter_policys: did you mean 'filter_policy' or "
            "'filter_policies'? A key this close to a name zaqar-filtering "
            "reads is taken for a misspelling", str(error))

    def test_misspelled_notify_strategy(self):
        error = self.reason({'_retry_policy': {'notify_stratgy': 'backoff'}})
        self.assertEqual('_retry_policy/notify_stratgy', error.location)
        self.assertIn("did you mean 'notify_strategy'?", str(error))

    def test_zaqars_and_unrelated_keys_are_kept(self):
        options = {key: 1 for key in ZAQAR_KEYS if key != '_retry_policy'}
        options.update(filter_policies=['a'], color='blue', x=1,
                       _retry_policy={key: 1 for key in ZAQAR_KEYS})
        self.assertEqual(options, validate_options(options))

    def test_the_matcher_refuses_a_misspelled_option(self):
        matcher = Matcher()
        self.assertRaises(InvalidPolicy, matcher.add, 'a',
                          {'binding_key': ['a.#']})
        self.assertEqual(set(), matcher.match({'routing_key': 'a.b'}))


class TestMessageFields(unittest.TestCase):

    def test_misspelled_fields_are_rejected(self):
        for key, meant in [('filter_policie', 'filter_policies'),
                           ('routing_keys', 'routing_key'),
                           ('routingkey', 'routing_key'),
                           ('Routing_Key', 'routing_key'),
                           ('attribute', 'attributes'),
                           ('atributes', 'attributes')]:
            with self.assertRaises(InvalidPolicy) as caught:
                validate_message({'body': 1, key: 'x'})
            self.assertEqual(key, caught.exception.option)
            self.assertEqual('field_name', caught.exception.rule)
            self.assertIn("did you mean '%s'?" % meant,
                          str(caught.exception))

    def test_zaqars_and_unrelated_fields_are_kept(self):
        message = {key: 1 for key in ZAQAR_KEYS}
        message.update(routing_key='a.b', tags=['x'], key='k',
                       ordering_key='k1')
        self.assertEqual({'routing_key': 'a.b', 'ordering_key': 'k1'},
                         validate_message(message))

    def test_a_misspelled_ordering_key_is_rejected(self):
        with self.assertRaises(InvalidPolicy) as caught:
            validate_message({'body': 1, 'ordering_keys': 'k1'})
        self.assertIn("did you mean 'ordering_key'?", str(caught.exception))


class TestEditDistance(unittest.TestCase):

    def test_against_a_plain_recursive_definition(self):
        def reference(a, b):
            if not a or not b:
                return len(a) + len(b)
            best = min(reference(a[1:], b) + 1, reference(a, b[1:]) + 1,
                       reference(a[1:], b[1:]) + (a[0] != b[0]))
            if len(a) > 1 and len(b) > 1 and a[:2] == b[1::-1]:
                best = min(best, reference(a[2:], b[2:]) + 1)
            return best

        words = ['', 'a', 'ab', 'ba', 'abc', 'acb', 'bca', 'abcd', 'xbcd']
        for a, b in itertools.product(words, repeat=2):
            for most in (1, 2, 3):
                self.assertEqual(min(reference(a, b), most + 1),
                                 spelling.edit_distance(a, b, most),
                                 (a, b, most))

    def test_a_huge_key_is_not_compared_letter_by_letter(self):
        self.assertEqual(3, spelling.edit_distance('x' * 10 ** 6,
                                                   'binding_keys', 2))
