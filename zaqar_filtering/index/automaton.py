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

The design follows AWS event-ruler: every policy becomes paths of states,
one step per condition, and a message walks the paths its values take.
A branch of a policy (a conjunction of conditions, each an OR of rules) is
first expanded into its single-rule conjunctions: ``{"a": ["x", "y"],
"b": ["z"]}`` gives ``a = x, b = z`` and ``a = y, b = z``. SNS's
combination limit bounds that product (150 by default), which is why it
exists. Each conjunction's steps are taken in a canonical order, and a
state leads to one next state per (key, rule), so conjunctions that begin
with the same steps share their states: 100,000 policies that all say
``"status": ["paid"]`` share one step, those that say ``"event":
["type7"]`` share another, and a value reached through one rule never
advances a conjunction that did not ask for it.

A state holds, per key, a :class:`_KeyMatcher` that maps the key's values
to next states: exact and case-folded values by dict, prefixes and
suffixes by one lookup per length in use, CIDR blocks by one lookup per
mask in use, numeric ranges in a :class:`RangeSet`, ``anything-but`` and
``exists`` by their own lists. A message walks from the root only along
the steps its values take, and collects the subscriptions of the states
where conjunctions end: the cost follows the message's values and the
(partial) matches, not the number of policies.

The canonical order puts selective and cheap steps first (exact values,
then prefixes and suffixes, CIDR blocks, numeric ranges, then ``exists:
true``, ``anything-but``, ``exists: false``), then orders by key: a state
reached by few messages is where the broad conditions are tested.
"""

import itertools
import sys

from zaqar_filtering.index.interval_index import RangeSet
from zaqar_filtering.policy import attributes as a
from zaqar_filtering.policy.message import path_prefixes
from zaqar_filtering.policy.message import PathTree
from zaqar_filtering.policy import values as v

STRING = v.STRING
NUMBER = v.NUMBER
NULL = v.NULL

# The canonical order of steps: by the rank of their rule, then by key.
# Cheap and selective lookups first: exact values, prefixes and suffixes
# (one dict lookup per length), CIDR blocks (an address to parse), numeric
# ranges (a scan, or an interval index walk), then the rules most messages
# pass.
_RANK = {a.Exact: 0, a.EqualsIgnoreCase: 0, a.Prefix: 1, a.Suffix: 1,
         a.Cidr: 2, a.Numeric: 3, a.AnythingBut: 5}


def _rank(rule):
    if type(rule) is a.Exists:
        return 4 if rule.flag else 6
    return _RANK[type(rule)]


def conjunctions(branch):
    """Yield the single-rule conjunctions of a branch, as lists of steps.

    A step is ``(path, rule)``; a conjunction lists its distinct steps in
    the canonical order. Steps of the same rank on the same key keep the
    policy's order, so the same policy always gives the same steps.
    """
    choices = [[(condition.path, rule)
                for rule in dict.fromkeys(condition.rules)]
               for condition in branch]
    for chosen in itertools.product(*choices):
        keys = {}
        for step in chosen:
            if step not in keys:
                keys[step] = (_rank(step[1]), step[0], len(keys))
        yield sorted(keys, key=keys.get)


class _State:
    """A point in the automaton after some steps held.

    :ivar edges: path -> :class:`_KeyMatcher` of the next steps.
    :ivar absent: the matchers of ``edges`` with an ``exists: false`` step,
        or None.
    :ivar subs: subscription id -> number of its conjunctions ending here,
        or None.
    :ivar refs: number of conjunctions that pass through or end here.

    ``absent`` and ``subs`` are None rather than empty: most states have
    neither, and the walk then tests them without reading another object.
    """
    __slots__ = ('edges', 'absent', 'subs', 'refs')

    def __init__(self):
        self.edges = {}
        self.absent = None
        self.subs = None
        self.refs = 0


def _network_key(network):
    return ((network.version, network.prefixlen),
            int(network.network_address))


def _count(counter, key, step):
    counter[key] = counter.get(key, 0) + step
    if not counter[key]:
        del counter[key]


class _KeyMatcher:
    """The steps on one key leaving one state: one next state per rule."""

    # What the walk reads first, so that it shares the object's first
    # cache line(s); the rest is for add and discard.
    __slots__ = ('scanned', 'has_exact', 'exact', 'prefix_plan', 'prefixes',
                 'rare_strings', 'bounds', 'numbers', 'has_anything_but',
                 'present', 'anything_but', 'ranges', 'absent', 'children',
                 'folded', 'suffixes', 'networks', 'prefix_lengths',
                 'suffix_lengths', 'masks')

    def __init__(self, grid):
        self.children = {}      # rule -> next _State
        self.exact = {}         # typed value -> next _State
        self.folded = {}
        self.prefixes = {}
        self.suffixes = {}
        self.networks = {}
        # Lengths and masks in use: a value is looked up once per each.
        self.prefix_lengths = {}
        self.suffix_lengths = {}
        self.masks = {}
        self.ranges = RangeSet(grid)
        # The ranges' bounds and next states while the RangeSet compares
        # them one by one (see RangeSet.SMALL), else None.
        self.bounds = None
        self.anything_but = {}  # AnythingBut rule -> next _State
        self.present = None     # the next state of exists: true
        self.absent = None      # the next state of exists: false
        # Whether any value needs more than the exact lookup, numbers a
        # range lookup; whether there are exact values, anything-but rules.
        self.scanned = self.numbers = False
        self.has_exact = self.has_anything_but = False
        # The prefix lengths in use, shortest first; whether strings need
        # the rarer lookups (case-folded, suffixes, CIDR blocks).
        self.prefix_plan = ()
        self.rare_strings = False

    def add(self, rule, child):
        self.children[rule] = child
        self._index(rule, child, True)
        self._update_scanned()

    def discard(self, rule):
        self._index(rule, self.children.pop(rule), False)
        self._update_scanned()

    def _index(self, rule, child, adding):
        step = 1 if adding else -1
        kind = type(rule)
        if kind is a.Numeric:
            ranges = self.ranges
            if adding:
                ranges.add(rule, child)
            else:
                ranges.discard(rule, child)
            self.bounds = None if ranges.tree is not None or not ranges else (
                tuple((known.low, known.low_inclusive, known.high,
                       known.high_inclusive, self.children[known])
                      for known in ranges.rules))
            return
        if kind is a.Exists:
            if rule.flag:
                self.present = child if adding else None
            else:
                self.absent = child if adding else None
            return
        if kind is a.Exact:
            table, key = self.exact, rule.value
        elif kind is a.EqualsIgnoreCase:
            table, key = self.folded, rule.folded
        elif kind is a.Prefix:
            table, key = self.prefixes, rule.text
            _count(self.prefix_lengths, len(key), step)
        elif kind is a.Suffix:
            table, key = self.suffixes, rule.text
            _count(self.suffix_lengths, len(key), step)
        elif kind is a.Cidr:
            table, key = self.networks, _network_key(rule.network)
            _count(self.masks, key[0], step)
        else:
            table, key = self.anything_but, rule
        if adding:
            table[key] = child
        else:
            del table[key]

    def _update_scanned(self):
        self.prefix_plan = tuple(sorted(self.prefix_lengths))
        self.rare_strings = bool(self.folded or self.suffix_lengths
                                 or self.masks)
        self.numbers = bool(self.ranges)
        self.has_exact = bool(self.exact)
        self.has_anything_but = bool(self.anything_but)
        self.scanned = bool(self.prefix_plan or self.rare_strings
                            or self.numbers or self.anything_but
                            or self.present is not None)

    def find(self, found, push):
        """Call ``push`` once with each next state the values take."""
        if len(found) == 1:
            # Each rule has its own next state: one value reaches each once.
            self.find_value(found[0], push)
            return
        hits = set()
        for value in found:
            self.find_value(value, hits.add)
        for child in hits:
            push(child)

    def find_value(self, value, add):
        """Call ``add`` with each next state that one typed value takes."""
        if self.has_exact:
            child = self.exact.get(value)
            if child is not None:
                add(child)
        if not self.scanned:
            return
        kind = value[0]
        if kind == STRING:
            if self.prefix_plan:  # the common string rule, inlined
                text, prefixes = value[1], self.prefixes
                size = len(text)
                for length in self.prefix_plan:
                    if length > size:
                        break
                    child = prefixes.get(text[:length])
                    if child is not None:
                        add(child)
            if self.rare_strings:
                self._find_string(value[1], add)
        elif kind == NUMBER:
            if self.bounds is not None:
                # Numeric.matches, inlined: most keys have a few ranges.
                number = value[1]
                for low, low_inclusive, high, high_inclusive, child in (
                        self.bounds):
                    if low is not None and (number < low if low_inclusive
                                            else number <= low):
                        continue
                    if high is not None and (number > high if high_inclusive
                                             else number >= high):
                        continue
                    add(child)
            elif self.numbers:
                hits = set()
                self.ranges.find(value, hits)
                for child in hits:
                    add(child)
        elif kind == NULL:
            return
        else:
            if self.present is not None:
                add(self.present)
            return
        if self.has_anything_but:
            for rule, child in self.anything_but.items():
                if rule.matches(value):
                    add(child)
        if self.present is not None:
            add(self.present)

    def _find_string(self, text, add):
        # Case-folded values, suffixes and CIDR blocks.
        if self.folded:
            child = self.folded.get(text.casefold())
            if child is not None:
                add(child)
        if self.suffix_lengths:
            suffixes, size = self.suffixes, len(text)
            for length in self.suffix_lengths:
                if length <= size:
                    child = suffixes.get(text[size - length:])
                    if child is not None:
                        add(child)
        if self.masks:
            address = a.ip_address((STRING, text))
            if address is not None:
                number = int(address)
                for mask in self.masks:
                    version, prefixlen = mask
                    if version == address.version:
                        shift = address.max_prefixlen - prefixlen
                        child = self.networks.get(
                            (mask, number >> shift << shift))
                        if child is not None:
                            add(child)


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
        self._tree = None

    def __bool__(self):
        return bool(self.root.edges)

    def add(self, sub_id, policy):
        """Add the branches of an :class:`AttributePolicy` for ``sub_id``."""
        for branch in policy.branches:
            for conjunction in conjunctions(branch):
                state = self.root
                for path, rule in conjunction:
                    matcher = state.edges.get(path)
                    if matcher is None:
                        # One string object per path for all states: the
                        # walk compares it with the message's keys.
                        matcher = state.edges[sys.intern(path)] = (
                            _KeyMatcher(self.grid))
                    child = matcher.children.get(rule)
                    if child is None:
                        child = _State()
                        matcher.add(rule, child)
                        if matcher.absent is not None:
                            if state.absent is None:
                                state.absent = {}
                            state.absent[path] = matcher
                    child.refs += 1
                    state = child
                if state.subs is None:
                    state.subs = {}
                state.subs[sub_id] = state.subs.get(sub_id, 0) + 1
            self._count_paths(branch, 1)

    def discard(self, sub_id, policy):
        """Undo :meth:`add` of the same policy."""
        for branch in policy.branches:
            for conjunction in conjunctions(branch):
                self._discard(sub_id, conjunction)
            self._count_paths(branch, -1)

    def _discard(self, sub_id, conjunction):
        state = self.root
        trail = []
        for path, rule in conjunction:
            matcher = state.edges[path]
            child = matcher.children[rule]
            trail.append((state, path, matcher, rule, child))
            state = child
        _count(state.subs, sub_id, -1)
        if not state.subs:
            state.subs = None
        for state, path, matcher, rule, child in trail:
            child.refs -= 1
            if child.refs:
                continue
            # No conjunction is left through ``child``: drop the step and
            # with it the states below, which only this one reached.
            matcher.discard(rule)
            if not matcher.children:
                del state.edges[path]
            if state.absent and (matcher.absent is None
                                 or not matcher.children):
                state.absent.pop(path, None)
                if not state.absent:
                    state.absent = None
            break

    def find(self, fields, out):
        """Add to ``out`` the ids of the subscriptions a message matches.

        :param fields: dict of path -> tuple of typed values.
        """
        # The automaton is a tree (a state has one parent step) and each
        # step of a state has its own next state, so no state is reached
        # twice and the walk needs no set of visited states.
        get = fields.get
        count = len(fields)
        stack = [self.root]
        pop, push = stack.pop, stack.append
        while stack:
            state = pop()
            if state.subs:
                out.update(state.subs)
            edges = state.edges
            if not edges:
                continue
            if len(edges) <= count:
                for path, matcher in edges.items():
                    found = get(path)
                    if not found:
                        continue
                    if len(found) > 1:
                        matcher.find(found, push)
                    elif matcher.scanned:
                        matcher.find_value(found[0], push)
                    else:
                        # The most common step: one value, exact values.
                        child = matcher.exact.get(found[0])
                        if child is not None:
                            push(child)
            else:
                for path, found in fields.items():
                    matcher = edges.get(path)
                    if matcher is not None and found:
                        matcher.find(found, push)
            if state.absent:
                for path, matcher in state.absent.items():
                    found = get(path)
                    if not found or all(value[0] == NULL
                                        for value in found):
                        push(matcher.absent)

    def path_tree(self):
        """Return :attr:`paths` as a PathTree, for flatten_body."""
        if self._tree is None:
            self._tree = PathTree(self.paths)
        return self._tree

    def _count_paths(self, branch, step):
        for condition in branch:
            for prefix in path_prefixes(condition.path):
                _count(self.paths, prefix, step)
        self._tree = None
