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

"""The matcher: which of a queue's subscriptions receive a message.

Each policy kind has its own index and every index answers exactly, for all
the subscriptions at once: tags in an inverted index (tag -> subscriptions),
binding keys in a word trie walked as a DFA (:mod:`.topic_trie`), SNS filter
policies in one automaton per scope (:mod:`.automaton`). A subscription with
several kinds is in every index of its kinds and is delivered when all of
them found it.
"""

from zaqar_filtering.index.automaton import PolicyAutomaton
from zaqar_filtering.index.interval_index import NumberGrid
from zaqar_filtering.index.topic_trie import TopicTrie
from zaqar_filtering.policy import attributes
from zaqar_filtering.policy.limits import DEFAULT_LIMITS
from zaqar_filtering.policy import message as fields
from zaqar_filtering.policy.subscription import parse_options

_TAGS, _BINDING_KEYS, _FILTER_POLICY = range(3)


class Matcher:
    """The subscriptions of one queue, compiled for matching.

    A message looks up only its own tags, routing key and values, so
    :meth:`match` costs about the same for 10 or 100,000 subscriptions: it
    follows the message and the number of matches. Subscriptions without
    policies match every message.

    :meth:`add` and :meth:`remove` update the indexes in place and are
    cheap; they must not run while another thread calls :meth:`match`
    (change a copy and swap the reference instead). Concurrent :meth:`match`
    calls are safe.

    :param limits: the :class:`Limits` that policies must keep.
    """

    def __init__(self, limits=DEFAULT_LIMITS):
        self.limits = limits
        self._policies = {}
        self._unfiltered = set()
        # Subscriptions with several kinds -> the kinds they have.
        self._several_kinds = {}
        self._tags = {}
        self._binding_keys = TopicTrie()
        # Subscriptions with binding keys (cheaper to test than the trie).
        self._binding_subs = 0
        grid = NumberGrid(limits.max_policy_number, limits.max_policy_decimals)
        self._attributes = PolicyAutomaton(grid)
        self._body = PolicyAutomaton(grid)

    def __len__(self):
        return len(self._policies)

    def __contains__(self, sub_id):
        return sub_id in self._policies

    def add(self, sub_id, options):
        """Add or replace the subscription ``sub_id`` with its options.

        :param sub_id: any hashable id.
        :param options: the subscription's options (a dict, or None).
        :raises InvalidPolicy: if the options are invalid; the matcher is
            then left unchanged.
        """
        policy = parse_options(options, self.limits)
        self.remove(sub_id)
        self._policies[sub_id] = policy
        self._index(sub_id, policy, True)

    def remove(self, sub_id):
        """Remove the subscription ``sub_id``; unknown ids are ignored."""
        policy = self._policies.pop(sub_id, None)
        if policy is not None:
            self._index(sub_id, policy, False)

    def match(self, message):
        """Return the set of subscription ids that receive ``message``.

        :param message: a dict with any of ``filter_policies``,
            ``routing_key``, ``attributes`` and ``body``. Fields it cannot
            read count as absent: validate messages with
            :func:`validate_message` first.
        :raises InvalidPolicy: if ``message`` is not a dict.
        """
        if not isinstance(message, dict):
            fields.MessageView(message)  # raises, naming the type
        several = self._several_kinds
        if several:
            found = (set(), set(), set())
        else:
            # Nothing to intersect: every index adds to the result.
            matched = set(self._unfiltered)
            found = (matched, matched, matched)
        if self._tags:
            tags = fields.read_tags(message)
            if tags:
                index, hits = self._tags, found[_TAGS]
                for tag in tags:
                    subs = index.get(tag)
                    if subs:
                        hits.update(subs)
        if self._binding_subs:
            words = fields.read_routing_key(message)
            if words is not None:
                self._binding_keys.find(words, found[_BINDING_KEYS])
        automaton = self._attributes
        if automaton.paths:
            automaton.find(fields.read_attributes(message, automaton.paths),
                           found[_FILTER_POLICY])
        automaton = self._body
        if automaton.paths:
            automaton.find(fields.flatten_body(message.get(fields.BODY),
                                               automaton.path_tree()),
                           found[_FILTER_POLICY])
        if not several:
            return matched
        matched = self._unfiltered.union(*found)
        # Iterate over the matches: intersection() with a dict would
        # iterate over the dict.
        for sub_id in [s for s in matched if s in several]:
            for kind in several[sub_id]:
                if sub_id not in found[kind]:
                    matched.discard(sub_id)
                    break
        return matched

    def _index(self, sub_id, policy, adding):
        kinds = []
        if policy.tags is not None:
            kinds.append(_TAGS)
            for tag in policy.tags:
                if adding:
                    self._tags.setdefault(tag, set()).add(sub_id)
                else:
                    subs = self._tags[tag]
                    subs.discard(sub_id)
                    if not subs:
                        del self._tags[tag]
        if policy.binding_keys is not None:
            kinds.append(_BINDING_KEYS)
            self._binding_subs += 1 if adding else -1
            for words in policy.binding_keys:
                if adding:
                    self._binding_keys.add(words, sub_id)
                else:
                    self._binding_keys.discard(words, sub_id)
        if policy.filter_policy is not None:
            kinds.append(_FILTER_POLICY)
            automaton = (self._body if policy.filter_policy.scope
                         == attributes.MESSAGE_BODY else self._attributes)
            if adding:
                automaton.add(sub_id, policy.filter_policy)
            else:
                automaton.discard(sub_id, policy.filter_policy)
        if not kinds:
            if adding:
                self._unfiltered.add(sub_id)
            else:
                self._unfiltered.discard(sub_id)
        elif len(kinds) > 1:
            if adding:
                self._several_kinds[sub_id] = tuple(kinds)
            else:
                del self._several_kinds[sub_id]
