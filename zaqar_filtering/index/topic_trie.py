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

"""A word trie of binding keys, as RabbitMQ's topic exchange keeps them.

A routing key walks the trie word by word, following the literal child,
the ``*`` child and the ``#`` child; the cost depends on the trie paths the
key can follow, not on how many binding keys are stored.
"""

from zaqar_filtering.policy.binding_key import HASH


class _Node:
    __slots__ = ('children', 'entries')

    def __init__(self):
        self.children = {}
        self.entries = set()


class TopicTrie:
    """Binding keys (word tuples) with the entries bound under each."""

    def __init__(self):
        self.root = _Node()

    def add(self, words, entry):
        """Bind ``entry`` under the binding key ``words``."""
        node = self.root
        for word in words:
            node = node.children.setdefault(word, _Node())
        node.entries.add(entry)

    def discard(self, words, entry):
        """Unbind ``entry`` from ``words`` and prune emptied nodes."""
        path = [self.root]
        for word in words:
            node = path[-1].children.get(word)
            if node is None:
                return
            path.append(node)
        path[-1].entries.discard(entry)
        for depth in range(len(words), 0, -1):
            node = path[depth]
            if node.entries or node.children:
                break
            del path[depth - 1].children[words[depth - 1]]

    def find(self, words, out):
        """Add to ``out`` the entries of the keys matching ``words``."""
        end = len(words)
        seen = set()
        stack = [(self.root, 0, False)]
        while stack:
            node, i, is_hash = stack.pop()
            state = (id(node), i)
            if state in seen:
                continue
            seen.add(state)
            if is_hash and i < end:
                stack.append((node, i + 1, True))  # '#' takes one more word
            hash_child = node.children.get(HASH)
            if hash_child is not None:
                stack.append((hash_child, i, True))  # '#' takes no word
            if i == end:
                out.update(node.entries)
                continue
            for word in (words[i], '*'):
                child = node.children.get(word)
                if child is not None and word != HASH:
                    stack.append((child, i + 1, False))
