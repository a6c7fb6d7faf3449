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
    """Intervals with entries, answering which intervals hold a point."""

    def __init__(self, grid):
        self.grid = grid
        self.offset = grid.top
        self.size = 1 << (2 * grid.top + 1).bit_length()
        self.nodes = {}

    def add(self, rule, entry):
        """Index ``entry`` under the range of a Numeric rule."""
        for node in self._cover(rule):
            self.nodes.setdefault(node, set()).add(entry)

    def discard(self, rule, entry):
        """Remove what :meth:`add` indexed."""
        for node in self._cover(rule):
            entries = self.nodes.get(node)
            if entries is not None:
                entries.discard(entry)
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
