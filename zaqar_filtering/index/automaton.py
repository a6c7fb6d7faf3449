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

"""The SNS filter policies of one scope, compiled into one automaton.

The design follows AWS event-ruler: every branch of every policy (a
conjunction of conditions) becomes a path of states, one step per
condition, the conditions taken in a canonical order. A state holds, per
key, a :class:`_KeyMatcher` that maps the key's values to next states:
exact and case-folded values by dict, prefixes and suffixes by one lookup
per length in use, CIDR blocks by one lookup per mask in use, numeric
ranges in a :class:`RangeSet`, ``anything-but`` and ``exists`` by their own
lists. Branches that begin with the same conditions share the states of
that prefix, so 100,000 policies that all say ``"status": ["paid"]`` share
one step, and those that say ``"event": ["type7"]`` share another.

A message walks from the root only along the steps its values take, and
collects the subscriptions of the states that end branches: the cost
follows the message's values and the (partial) matches, not the number of
policies.

The canonical order puts selective conditions first (exact values, then
prefixes, suffixes, ranges and CIDR blocks, then ``exists: true``, then
``anything-but``, then ``exists: false``), then orders by key: a state
reached by few messages is where the broad conditions are tested.

A step leads to one state per (state, condition): two branches take the
same step only when their conditions are equal (same key, same rules), so
a value matching a rule of one never advances the other.
"""

from zaqar_filtering.index.interval_index import RangeSet
from zaqar_filtering.policy import attributes as a
from zaqar_filtering.policy.message import path_prefixes
from zaqar_filtering.policy import values as v

STRING = v.STRING
NUMBER = v.NUMBER
NULL = v.NULL

_RANK = {a.Exact: 0, a.EqualsIgnoreCase: 0, a.Prefix: 1, a.Suffix: 1,
         a.Cidr: 1, a.Numeric: 1, a.AnythingBut: 3}


def _rank(rule):
    if type(rule) is a.Exists:
        return 2 if rule.flag else 4
    return _RANK[type(rule)]


def steps(branch):
    """Return a branch's distinct conditions in the canonical order.

    Each step is ``(path, rules)`` with ``rules`` a frozenset: equal
    conditions are one step and give one key in every matcher. Conditions
    of the same rank on the same path (from ``$or``) keep the policy's
    order, so the same policy always gives the same steps.
    """
    keys = {}
    for condition in branch:
        key = (condition.path, frozenset(condition.rules))
        if key not in keys:
            keys[key] = (max(map(_rank, condition.rules)), condition.path,
                         len(keys))
    return sorted(keys, key=keys.get)


class _State:
    """A point in the automaton after some conditions held.

    :ivar edges: path -> :class:`_KeyMatcher` of the next conditions.
    :ivar absent: the matchers of ``edges`` with ``exists: false`` rules.
    :ivar subs: subscription id -> number of its branches ending here.
    :ivar refs: number of branches that pass through or end here.
    """
    __slots__ = ('edges', 'absent', 'subs', 'refs')

    def __init__(self):
        self.edges = {}
        self.absent = {}
        self.subs = {}
        self.refs = 0


def _network_key(network):
    return ((network.version, network.prefixlen),
            int(network.network_address))


def _count(counter, key, step):
    counter[key] = counter.get(key, 0) + step
    if not counter[key]:
        del counter[key]


class _KeyMatcher:
    """The conditions on one key leaving one state, indexed by rule."""

    __slots__ = ('children', 'exact', 'folded', 'prefixes', 'suffixes',
                 'networks', 'prefix_lengths', 'suffix_lengths', 'masks',
                 'ranges', 'anything_but', 'present', 'absent', 'strings',
                 'scanned')

    def __init__(self, grid):
        self.children = {}      # rules of a condition -> next _State
        self.exact = {}         # typed value -> set of states
        self.folded = {}
        self.prefixes = {}
        self.suffixes = {}
        self.networks = {}
        # Lengths and masks in use: a value is looked up once per each.
        self.prefix_lengths = {}
        self.suffix_lengths = {}
        self.masks = {}
        self.ranges = RangeSet(grid)
        self.anything_but = {}  # AnythingBut rule -> set of states
        self.present = set()    # exists: true
        self.absent = set()     # exists: false
        # Whether strings need more than the exact lookup; whether any
        # value does.
        self.strings = self.scanned = False

    def add(self, rules, child):
        self.children[rules] = child
        for rule in rules:
            if self._bucketed(rule):
                self._table(rule, 1).setdefault(self._key(rule),
                                                set()).add(child)
            else:
                self._set(rule, child, True)
        self._update_scanned()

    def discard(self, rules):
        child = self.children.pop(rules)
        for rule in rules:
            if self._bucketed(rule):
                table = self._table(rule, -1)
                key = self._key(rule)
                states = table[key]
                states.discard(child)
                if not states:
                    del table[key]
            else:
                self._set(rule, child, False)
        self._update_scanned()

    @staticmethod
    def _bucketed(rule):
        return type(rule) in (a.Exact, a.EqualsIgnoreCase, a.Prefix,
                              a.Suffix, a.Cidr)

    @staticmethod
    def _key(rule):
        kind = type(rule)
        if kind is a.Exact:
            return rule.value
        if kind is a.EqualsIgnoreCase:
            return rule.folded
        if kind is a.Cidr:
            return _network_key(rule.network)
        return rule.text

    def _table(self, rule, step):
        # The rule's dict, counting the prefix/suffix length or CIDR mask.
        kind = type(rule)
        if kind is a.Exact:
            return self.exact
        if kind is a.EqualsIgnoreCase:
            return self.folded
        if kind is a.Prefix:
            _count(self.prefix_lengths, len(rule.text), step)
            return self.prefixes
        if kind is a.Suffix:
            _count(self.suffix_lengths, len(rule.text), step)
            return self.suffixes
        _count(self.masks, _network_key(rule.network)[0], step)
        return self.networks

    def _set(self, rule, child, adding):
        kind = type(rule)
        if kind is a.Numeric:
            if adding:
                self.ranges.add(rule, child)
            else:
                self.ranges.discard(rule, child)
            return
        if kind is a.AnythingBut:
            states = self.anything_but.setdefault(rule, set())
            if adding:
                states.add(child)
            else:
                states.discard(child)
                if not states:
                    del self.anything_but[rule]
            return
        states = self.present if rule.flag else self.absent
        if adding:
            states.add(child)
        else:
            states.discard(child)

    def _update_scanned(self):
        self.strings = bool(self.folded or self.prefix_lengths
                            or self.suffix_lengths or self.masks)
        self.scanned = bool(self.strings or self.ranges or self.anything_but
                            or self.present)

    def find(self, found, hits):
        """Add to ``hits`` the next states that the values ``found`` take."""
        exact = self.exact
        for value in found:
            states = exact.get(value)
            if states:
                hits.update(states)
        if not self.scanned:
            return
        strings, ranges = self.strings, self.ranges
        anything_but = self.anything_but
        present = False
        for value in found:
            kind = value[0]
            if kind == STRING:
                present = True
                if strings:
                    self._find_string(value, hits)
            elif kind == NUMBER:
                present = True
                if ranges:
                    ranges.find(value, hits)
            elif kind != NULL:
                present = True
                continue
            else:
                continue
            if anything_but:
                for rule, states in anything_but.items():
                    if rule.matches(value):
                        hits.update(states)
        if present and self.present:
            hits.update(self.present)

    def _find_string(self, value, hits):
        text = value[1]
        if self.folded:
            states = self.folded.get(text.casefold())
            if states:
                hits.update(states)
        size = len(text)
        if self.prefix_lengths:
            prefixes = self.prefixes
            for length in self.prefix_lengths:
                if length <= size:
                    states = prefixes.get(text[:length])
                    if states:
                        hits.update(states)
        if self.suffix_lengths:
            suffixes = self.suffixes
            for length in self.suffix_lengths:
                if length <= size:
                    states = suffixes.get(text[size - length:])
                    if states:
                        hits.update(states)
        if self.masks:
            address = a.ip_address(value)
            if address is not None:
                number = int(address)
                for mask in self.masks:
                    version, prefixlen = mask
                    if version == address.version:
                        shift = address.max_prefixlen - prefixlen
                        states = self.networks.get(
                            (mask, number >> shift << shift))
                        if states:
                            hits.update(states)


class PolicyAutomaton:
    """The filter policies of one scope, as one automaton.

    :param grid: the :class:`NumberGrid` of the policy number limits.
    """

    def __init__(self, grid):
        self.grid = grid
        self.root = _State()
        # The paths that policies read, with their path_prefixes, counted:
        # the message fields outside them need not be read.
        self.paths = {}

    def __bool__(self):
        return bool(self.root.edges)

    def add(self, sub_id, policy):
        """Add the branches of an :class:`AttributePolicy` for ``sub_id``."""
        for branch in policy.branches:
            state = self.root
            for path, rules in steps(branch):
                matcher = state.edges.get(path)
                if matcher is None:
                    matcher = state.edges[path] = _KeyMatcher(self.grid)
                child = matcher.children.get(rules)
                if child is None:
                    child = _State()
                    matcher.add(rules, child)
                    if matcher.absent:
                        state.absent[path] = matcher
                child.refs += 1
                state = child
            state.subs[sub_id] = state.subs.get(sub_id, 0) + 1
            self._count_paths(branch, 1)

    def discard(self, sub_id, policy):
        """Undo :meth:`add` of the same policy."""
        for branch in policy.branches:
            state = self.root
            trail = []
            for path, rules in steps(branch):
                matcher = state.edges[path]
                child = matcher.children[rules]
                trail.append((state, path, matcher, rules, child))
                state = child
            _count(state.subs, sub_id, -1)
            for state, path, matcher, rules, child in reversed(trail):
                child.refs -= 1
                if child.refs:
                    continue
                # No branch left through ``child``: its edges are gone.
                matcher.discard(rules)
                if not matcher.children:
                    del state.edges[path]
                if not matcher.absent or not matcher.children:
                    state.absent.pop(path, None)
            self._count_paths(branch, -1)

    def find(self, fields, out):
        """Add to ``out`` the ids of the subscriptions a message matches.

        :param fields: dict of path -> tuple of typed values.
        """
        stack = [self.root]
        pop, push = stack.pop, stack.append
        count = len(fields)
        while stack:
            state = pop()
            hits = set()
            edges = state.edges
            if len(edges) <= count:
                for path, matcher in edges.items():
                    found = fields.get(path)
                    if not found:
                        continue
                    if matcher.scanned:
                        matcher.find(found, hits)
                        continue
                    exact = matcher.exact  # the common case, inlined
                    for value in found:
                        states = exact.get(value)
                        if states:
                            hits.update(states)
            else:
                for path, found in fields.items():
                    matcher = edges.get(path)
                    if matcher is not None and found:
                        matcher.find(found, hits)
            if state.absent:
                for path, matcher in state.absent.items():
                    found = fields.get(path)
                    if not found or all(value[0] == NULL
                                        for value in found):
                        hits.update(matcher.absent)
            for child in hits:
                if child.subs:
                    out.update(child.subs)
                if child.edges:
                    push(child)

    def _count_paths(self, branch, step):
        for condition in branch:
            for prefix in path_prefixes(condition.path):
                _count(self.paths, prefix, step)
