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

"""The matcher: which of a queue's subscriptions receive a message."""

import collections

from zaqar_filtering.index.attribute_index import AttributeIndex
from zaqar_filtering.index.interval_index import NumberGrid
from zaqar_filtering.index.topic_trie import TopicTrie
from zaqar_filtering.policy import attributes
from zaqar_filtering.policy.limits import DEFAULT_LIMITS
from zaqar_filtering.policy.message import MessageView
from zaqar_filtering.policy.message import path_prefixes
from zaqar_filtering.policy.subscription import parse_options
from zaqar_filtering.policy.subscription import scope_fields


class Matcher:
    """The subscriptions of one queue, compiled for matching.

    Each subscription is indexed under one of its policy kinds: tags in an
    inverted index (tag -> subscriptions), binding keys in a word trie,
    filter policies in value indexes. A message looks up only its own tags,
    routing key and values, and each subscription found is then checked in
    full, so :meth:`match` costs about the same for 10 or 100,000
    subscriptions. Subscriptions without policies match every message.

    :meth:`add` and :meth:`remove` update the indexes in place and are
    cheap; they must not run while another thread calls :meth:`match`
    (build a new Matcher and swap the reference instead).

    :param limits: the :class:`Limits` that policies must keep.
    """

    def __init__(self, limits=DEFAULT_LIMITS):
        self.limits = limits
        self._policies = {}
        self._unfiltered = set()
        # Subscriptions with tags only or binding keys only: an index hit
        # is a match, and the full check is skipped.
        self._decided_by_index = set()
        self._tags = {}
        self._binding_keys = TopicTrie()
        grid = NumberGrid(limits.max_policy_number, limits.max_policy_decimals)
        self._attributes = {scope: AttributeIndex(grid)
                            for scope in attributes.SCOPES}
        # The body paths that MessageBody policies read, with their
        # prefixes, counted: match() flattens only these parts of a body.
        self._body_paths = collections.Counter()

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
        """
        view = MessageView(message, self._body_paths)
        candidates = set()
        if view.tags is not None:
            for tag in view.tags:
                found = self._tags.get(tag)
                if found:
                    candidates.update(found)
        if view.routing_key is not None:
            self._binding_keys.find(view.routing_key, candidates)
        for scope, index in self._attributes.items():
            if index:
                index.find(scope_fields(scope, view), candidates)
        policies = self._policies
        matched = self._unfiltered | (candidates & self._decided_by_index)
        matched.update(sub_id for sub_id
                       in candidates - self._decided_by_index
                       if policies[sub_id].matches(view))
        return matched

    def _index(self, sub_id, policy, adding):
        # A subscription is indexed under one kind only; match() checks the
        # others on each candidate.
        if policy.filter_policy is not None and \
                policy.filter_policy.scope == attributes.MESSAGE_BODY:
            self._count_body_paths(policy.filter_policy, 1 if adding else -1)
        one_indexed_kind = policy.filter_policy is None and (
            (policy.tags is None) != (policy.binding_keys is None))
        if one_indexed_kind:
            if adding:
                self._decided_by_index.add(sub_id)
            else:
                self._decided_by_index.discard(sub_id)
        if policy.tags is not None:
            for tag in policy.tags:
                if adding:
                    self._tags.setdefault(tag, set()).add(sub_id)
                else:
                    found = self._tags[tag]
                    found.discard(sub_id)
                    if not found:
                        del self._tags[tag]
        elif policy.binding_keys is not None:
            for words in policy.binding_keys:
                if adding:
                    self._binding_keys.add(words, sub_id)
                else:
                    self._binding_keys.discard(words, sub_id)
        elif policy.filter_policy is not None:
            index = self._attributes[policy.filter_policy.scope]
            if adding:
                index.add(sub_id, policy.filter_policy)
            else:
                index.discard(sub_id, policy.filter_policy)
        elif adding:
            self._unfiltered.add(sub_id)
        else:
            self._unfiltered.discard(sub_id)

    def _count_body_paths(self, policy, step):
        counts = self._body_paths
        for branch in policy.branches:
            for condition in branch:
                for prefix in path_prefixes(condition.path):
                    counts[prefix] += step
                    if not counts[prefix]:
                        del counts[prefix]
