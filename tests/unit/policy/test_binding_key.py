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

"""Binding keys and routing keys: wildcard rules, limits, bad input."""

import itertools
import unittest

from zaqar_filtering.index.topic_trie import TopicTrie
from zaqar_filtering import InvalidPolicy
from zaqar_filtering.policy.binding_key import key_matches
from zaqar_filtering import validate_message
from zaqar_filtering import validate_options


def matches(pattern, key):
    return key_matches(tuple(pattern.split('.')), tuple(key.split('.')))


class TestKeyMatches(unittest.TestCase):

    def test_table(self):
        table = [
            ('1.*.0', '1.x.0', True),
            ('1.*.0', '1.0', False),              # '*' is never empty
            ('1.*.0', '1.x.y.0', False),
            ('1.#.0', '1.2.3.4.4.2.2.0', True),
            ('1.#.0', '1.0', True),               # '#' may be empty
            ('1.#.0', '1.x', False),
            ('1.#.0', '2.0', False),
            ('#', 'anything', True),
            ('#', 'a.b.c', True),
            ('*', 'a', True),
            ('*', 'a.b', False),
            ('a.#', 'a', True),
            ('#.a', 'b.a', True),
            ('#.a', 'a.b', False),
            ('a.*.#', 'a', False),
            ('a.*.#', 'a.b', True),
            ('*.#.*', 'a', False),
            ('*.#.*', 'a.b', True),
            ('#.#', 'a', True),
            ('a.b', 'a.b', True),
            ('a.b', 'a.B', False),                # case-sensitive
            ('#.x.#.x.#', 'a.x.b.c.x', True),
            ('#.x.#.x.#', 'a.x.b.c', False),
        ]
        for pattern, key, expected in table:
            with self.subTest(pattern=pattern, key=key):
                self.assertEqual(expected, matches(pattern, key))

    def test_trie_agrees_with_the_rule_exhaustively(self):
        # Every pattern of up to 4 words over a, b, *, # against every key
        # of up to 4 words over a, b: 340 patterns x 30 keys.
        patterns = [p for n in range(1, 5)
                    for p in itertools.product('ab*#', repeat=n)]
        keys = [k for n in range(1, 5)
                for k in itertools.product('ab', repeat=n)]
        trie = TopicTrie()
        for pattern in patterns:
            trie.add(pattern, pattern)
        for key in keys:
            found = set()
            trie.find(key, found)
            expected = {p for p in patterns if key_matches(p, key)}
            self.assertEqual(expected, found, key)
        for pattern in patterns[::2]:
            trie.discard(pattern, pattern)
        for key in keys:
            found = set()
            trie.find(key, found)
            self.assertEqual({p for p in patterns[1::2]
                              if key_matches(p, key)}, found, key)
        for pattern in patterns[1::2]:
            trie.discard(pattern, pattern)
        self.assertEqual({}, trie.root.children)


class TestBindingKeyLimits(unittest.TestCase):

    def test_good(self):
        table = [
            ['a' * 64],                              # 64 bytes
            ['\u00e9' * 32],                         # 64 bytes in UTF-8
            ['.'.join('w' * 16)],                    # 16 words
            ['a', 'b', 'c', 'd', 'e'],               # 5 keys
            ['#'], ['*'], ['a.*.#.b'],
        ]
        for keys in table:
            with self.subTest(keys=keys):
                self.assertEqual(
                    sorted(set(keys)),
                    validate_options({'binding_keys': keys})['binding_keys'])

    def test_bad(self):
        table = [
            (['a' * 65], 'binding_key_bytes',
             "binding key '%s...' has 65 bytes; the limit is 64" % ('a' * 40)),
            (['\u00e9' * 33], 'binding_key_bytes', 'has 66 bytes'),
            (['.'.join('w' * 17)], 'binding_key_words',
             'has 17 words; the limit is 16'),
            (['a', 'b', 'c', 'd', 'e', 'f'], 'binding_keys_count',
             'binding_keys: 6 binding keys; the limit is 5'),
            ([''], 'binding_key_empty_word', 'has an empty word'),
            (['a..b'], 'binding_key_empty_word', 'has an empty word'),
            (['.a'], 'binding_key_empty_word', 'has an empty word'),
            (['a.'], 'binding_key_empty_word', 'has an empty word'),
            (['a*.b'], 'binding_key_wildcard', "binding key 'a*.b': '*' and "
             "'#' are wildcards that stand alone as words"),
            (['#x'], 'binding_key_wildcard', 'stand alone'),
            (['a\nb'], 'binding_key_control_character', 'control character'),
            ([5], 'binding_key_type', 'binding key 5 is not a string'),
            ('a.b', 'binding_keys_type',
             "must be a list of binding keys, not 'a.b'"),
        ]
        for keys, rule, text in table:
            with self.subTest(keys=keys):
                with self.assertRaises(InvalidPolicy) as caught:
                    validate_options({'binding_keys': keys})
                self.assertIn(text, str(caught.exception))
                self.assertTrue(str(caught.exception).startswith(
                    'binding_keys: '))
                self.assertEqual(rule, caught.exception.rule)


class TestRoutingKey(unittest.TestCase):

    def test_good(self):
        for key in ('a' * 64, '.'.join('w' * 16), 'order.eu.created', 'x'):
            with self.subTest(key=key):
                self.assertEqual({'routing_key': key},
                                 validate_message({'routing_key': key}))

    def test_bad(self):
        table = [
            ('a' * 65, 'routing_key_bytes', 'has 65 bytes; the limit is 64'),
            ('.'.join('w' * 17), 'routing_key_words',
             'has 17 words; the limit is 16'),
            ('a.*', 'routing_key_wildcard', "'*' and '#' are wildcards"),
            ('#', 'routing_key_wildcard', "'*' and '#' are wildcards"),
            ('a..b', 'routing_key_empty_word', 'has an empty word'),
            ('', 'routing_key_empty_word', 'has an empty word'),
            (['a'], 'routing_key_type', "routing key [\"a\"] is not a string"),
        ]
        for key, rule, text in table:
            with self.subTest(key=key):
                with self.assertRaises(InvalidPolicy) as caught:
                    validate_message({'routing_key': key})
                self.assertIn(text, str(caught.exception))
                self.assertEqual('routing_key', caught.exception.option)
                self.assertEqual(rule, caught.exception.rule)
