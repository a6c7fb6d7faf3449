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

"""Numeric ranges indexed so that a point query costs O(log range).

:class:`RangeSet` is what the policy automaton keeps per state and key: the
few ranges most keys have are compared directly; past a handful, they are
also held in an :class:`IntervalIndex`.

Policy numbers lie on a fixed grid (SNS allows at most 5 decimals within
+-1e9), so every bound becomes an integer. The grid is doubled so that odd
points stand for the numbers strictly between two grid numbers, and numbers
beyond the limits fall on two sentinels: every comparison with a policy
bound stays exact. Ranges are stored in an implicit segment tree held in a
dict: an insert touches O(log) nodes and a query walks one leaf-to-root
path, whatever the number of ranges.
"""

import decimal


class NumberGrid:
    """Maps Decimals to integer points.

    The points order exactly as the numbers do relative to every number a
    policy may hold.
    """

    def __init__(self, max_number, decimals):
        self.decimals = decimals
        self.top = 2 * max_number * 10 ** decimals + 1  # the high sentinel

    def point(self, number):
        """Return the grid point of a Decimal."""
        digits = len(number.as_tuple().digits)
        with decimal.localcontext() as context:
            context.prec = max(28, digits + self.decimals + 2)
            scaled = number.scaleb(self.decimals)
            floor = scaled.to_integral_value(rounding=decimal.ROUND_FLOOR)
        point = 2 * int(floor) + (0 if floor == scaled else 1)
        return max(-self.top, min(self.top, point))

    def interval(self, rule):
        """Return the inclusive (low, high) points of a Numeric rule."""
        if rule.low is None:
            low = -self.top
        else:
            low = self.point(rule.low) + (0 if rule.low_inclusive else 1)
        if rule.high is None:
            high = self.top
        else:
            high = self.point(rule.high) - (0 if rule.high_inclusive else 1)
        return low, high


class IntervalIndex:
    """Intervals with entries, answering which intervals hold a point.

    A node counts how many ranges of an entry cover it, so overlapping
    ranges of one entry can be discarded one at a time.
    """

    def __init__(self, grid):
        self.grid = grid
        self.offset = grid.top
        self.size = 1 << (2 * grid.top + 1).bit_length()
        self.nodes = {}

    def add(self, rule, entry):
        """Index ``entry`` under the range of a Numeric rule."""
        for node in self._cover(rule):
            entries = self.nodes.setdefault(node, {})
            entries[entry] = entries.get(entry, 0) + 1

    def discard(self, rule, entry):
        """Remove what :meth:`add` indexed."""
        for node in self._cover(rule):
            entries = self.nodes.get(node)
            if entries is not None and entry in entries:
                entries[entry] -= 1
                if not entries[entry]:
                    del entries[entry]
                    if not entries:
                        del self.nodes[node]

    def find(self, number, out):
        """Add to ``out`` the entries whose range holds a Decimal."""
        node = self.grid.point(number) + self.offset + self.size
        nodes = self.nodes
        while node:
            entries = nodes.get(node)
            if entries:
                out.update(entries)
            node >>= 1

    def __bool__(self):
        return bool(self.nodes)

    def _cover(self, rule):
        # The canonical nodes of a bottom-up segment tree covering [low, high].
        low, high = self.grid.interval(rule)
        low += self.offset + self.size
        high += self.offset + self.size + 1
        while low < high:
            if low & 1:
                yield low
                low += 1
            if high & 1:
                high -= 1
                yield high
            low >>= 1
            high >>= 1


class RangeSet:
    """Numeric rules with entries, answering which rules hold a value.

    While there are at most :attr:`SMALL` distinct rules they are compared
    one by one (a few Decimal comparisons); past that an
    :class:`IntervalIndex` answers in O(log range). The index is built when
    the set grows past ``SMALL`` and dropped when it shrinks to half of it,
    so add/remove around the limit do not rebuild it each time.
    """

    SMALL = 8

    def __init__(self, grid):
        self.grid = grid
        self.rules = {}
        self.tree = None

    def __bool__(self):
        return bool(self.rules)

    def add(self, rule, entry):
        """Add ``entry`` under a Numeric rule."""
        entries = self.rules.setdefault(rule, set())
        if entry in entries:
            return
        entries.add(entry)
        if self.tree is not None:
            self.tree.add(rule, entry)
        elif len(self.rules) > self.SMALL:
            self.tree = IntervalIndex(self.grid)
            for known, known_entries in self.rules.items():
                for known_entry in known_entries:
                    self.tree.add(known, known_entry)

    def discard(self, rule, entry):
        """Remove what :meth:`add` added."""
        entries = self.rules.get(rule)
        if not entries or entry not in entries:
            return
        entries.discard(entry)
        if not entries:
            del self.rules[rule]
        if self.tree is not None:
            if len(self.rules) <= self.SMALL // 2:
                self.tree = None
            else:
                self.tree.discard(rule, entry)

    def find(self, value, out):
        """Add to ``out`` the entries of the rules matching a typed number."""
        if self.tree is None:
            for rule, entries in self.rules.items():
                if rule.matches(value):
                    out.update(entries)
        else:
            self.tree.find(value[1], out)
