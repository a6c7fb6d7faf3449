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

"""The binding-key trie walked as a lazy DFA agrees with the reference rule,
also after keys are added and removed between lookups."""

import itertools
import unittest

from zaqar_filtering.index import topic_trie
from zaqar_filtering.policy.binding_key import key_matches

PATTERNS = ['a.b', 'a.*', '#', 'a.#', '#.b', '*.#.b', 'a.#.#', '*', '#.*.#',
            'b.*.a', 'a.b.#', '*.*']
KEYS = [tuple(words) for size in range(1, 5)
        for words in itertools.product('abc', repeat=size)]


def find(trie, words):
    out = set()
    trie.find(words, out)
    return out


class TestTopicTrie(unittest.TestCase):

    def assert_agrees(self, trie, patterns):
        for words in KEYS + [('*',), ('#',), ('a', '#')]:
            self.assertEqual(
                {p for p in patterns if key_matches(tuple(p.split('.')),
                                                    words)},
                find(trie, words), words)

    def test_agrees_with_the_reference_rule(self):
        trie = topic_trie.TopicTrie()
        for pattern in PATTERNS:
            trie.add(tuple(pattern.split('.')), pattern)
        self.assert_agrees(trie, PATTERNS)
        # A second pass is served by the DFA built in the first.
        self.assert_agrees(trie, PATTERNS)

    def test_changes_between_lookups(self):
        trie = topic_trie.TopicTrie()
        bound = []
        for pattern in PATTERNS:
            trie.add(tuple(pattern.split('.')), pattern)
            bound.append(pattern)
            self.assert_agrees(trie, bound)
        for pattern in PATTERNS[::2]:
            trie.discard(tuple(pattern.split('.')), pattern)
            bound.remove(pattern)
            self.assert_agrees(trie, bound)
        for pattern in bound[:]:
            trie.discard(tuple(pattern.split('.')), pattern)
        self.assertFalse(trie.root)

    def test_dfa_starts_over_past_its_limit(self):
        trie = topic_trie.TopicTrie()
        for pattern in PATTERNS:
            trie.add(tuple(pattern.split('.')), pattern)
        limit = topic_trie.MAX_DFA_STATES
        topic_trie.MAX_DFA_STATES = 3
        try:
            self.assert_agrees(trie, PATTERNS)
            # At most one start state and one per word beyond the limit.
            self.assertLessEqual(len(trie._states), 3 + 1 + 4)
        finally:
            topic_trie.MAX_DFA_STATES = limit
