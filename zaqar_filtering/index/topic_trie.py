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

"""A word trie of binding keys, as RabbitMQ's topic exchange keeps them,
walked as a lazily built DFA.

The trie is a nondeterministic automaton: a routing key may follow the
literal child, the ``*`` child and the ``#`` child of a node at once, and a
``#`` node keeps consuming words. A DFA state is the set of trie nodes a
prefix of a routing key can be in; its transitions are computed the first
time a word needs them and kept: one per literal word of its nodes, and one
shared by every other word (which can only follow ``*`` and ``#``). After
warm-up a routing key costs one dict lookup per word, whatever the number
of binding keys. Any :meth:`TopicTrie.add` or :meth:`TopicTrie.discard`
drops the DFA; it is at most :data:`MAX_DFA_STATES` states, else it starts
over.

Concurrent :meth:`TopicTrie.find` calls may fill the DFA at the same time:
each computes the same transition and the last store wins.
"""

from zaqar_filtering.policy.binding_key import HASH
from zaqar_filtering.policy.binding_key import STAR

MAX_DFA_STATES = 4096


class _Node:
    __slots__ = ('children', 'star', 'hash', 'is_hash', 'entries')

    def __init__(self, is_hash=False):
        self.children = {}   # literal word -> _Node
        self.star = None
        self.hash = None
        self.is_hash = is_hash  # reached by '#': may consume more words
        self.entries = set()

    def child(self, word):
        if word == STAR:
            return self.star
        if word == HASH:
            return self.hash
        return self.children.get(word)

    def set_child(self, word, node):
        if word == STAR:
            self.star = node
        elif word == HASH:
            self.hash = node
        elif node is None:
            del self.children[word]
        else:
            self.children[word] = node

    def __bool__(self):
        return bool(self.entries or self.children or self.star
                    or self.hash)


class _DfaState:
    __slots__ = ('nodes', 'final', 'words', 'other')

    def __init__(self, nodes):
        self.nodes = nodes
        self.final = tuple(node.entries for node in nodes if node.entries)
        self.words = {}     # literal word -> _DfaState
        self.other = None   # the state for every other word


class TopicTrie:
    """Binding keys (word tuples) with the entries bound under each."""

    def __init__(self):
        self.root = _Node()
        self._states = {}   # frozenset of nodes -> _DfaState
        self._start = None

    def __bool__(self):
        return bool(self.root)

    def add(self, words, entry):
        """Bind ``entry`` under the binding key ``words``."""
        node = self.root
        for word in words:
            child = node.child(word)
            if child is None:
                child = _Node(word == HASH)
                node.set_child(word, child)
            node = child
        node.entries.add(entry)
        self._forget()

    def discard(self, words, entry):
        """Unbind ``entry`` from ``words`` and prune emptied nodes."""
        path = [self.root]
        for word in words:
            node = path[-1].child(word)
            if node is None:
                return
            path.append(node)
        path[-1].entries.discard(entry)
        for depth in range(len(words), 0, -1):
            if path[depth]:
                break
            path[depth - 1].set_child(words[depth - 1], None)
        self._forget()

    def find(self, words, out):
        """Add to ``out`` the entries of the keys matching ``words``."""
        state = self._start
        if state is None or len(self._states) > MAX_DFA_STATES:
            self._forget()
            state = self._start = self._state([self.root])
        for word in words:
            following = state.words.get(word)
            if following is None:
                following = self._step(state, word)
            state = following
            if not state.nodes:
                return
        for entries in state.final:
            out.update(entries)

    def _forget(self):
        self._states = {}
        self._start = None

    def _step(self, state, word):
        literal = any(word in node.children for node in state.nodes)
        if not literal and state.other is not None:
            return state.other
        following = []
        for node in state.nodes:
            if literal:
                child = node.children.get(word)
                if child is not None:
                    following.append(child)
            if node.star is not None:
                following.append(node.star)
            if node.is_hash:
                following.append(node)
        result = self._state(following)
        if literal:
            state.words[word] = result
        else:
            state.other = result
        return result

    def _state(self, nodes):
        # '#' may match no word: a node's '#' child is where it is too.
        closed = {}
        for node in nodes:
            while node is not None and node not in closed:
                closed[node] = None
                node = node.hash
        key = frozenset(closed)
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = _DfaState(tuple(closed))
        return state
