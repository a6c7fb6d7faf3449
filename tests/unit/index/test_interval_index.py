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

"""Numeric ranges: the segment tree over the number grid agrees with
comparing Decimals, at and around every bound."""

import decimal
import itertools
import unittest

from zaqar_filtering.index.interval_index import IntervalIndex
from zaqar_filtering.index.interval_index import NumberGrid
from zaqar_filtering.index.interval_index import RangeSet
from zaqar_filtering.policy.attributes import Numeric

D = decimal.Decimal
BOUNDS = [D('-1000000000'), D('-2.5'), D('0'), D('0.00001'), D('1'),
          D('999999999.99999'), D('1000000000')]
PROBES = sorted(set(
    [b + delta for b in BOUNDS
     for delta in (D(0), D('0.00001'), D('-0.00001'), D('0.000001'),
                   D('-0.000001'), D('1e-30'), D('-1e-30'))]
    + [D('1e30'), D('-1e30'), D('1000000000.000001'), D('5e9')]))


def rules():
    for low, high in itertools.combinations([None] + BOUNDS, 2):
        for low_inc, high_inc in itertools.product((False, True), repeat=2):
            yield Numeric(low, low_inc, high, high_inc)
    for bound in BOUNDS:
        yield Numeric(high=bound, high_inclusive=True)
        yield Numeric(high=bound)
        yield Numeric(bound, True, bound, True)


class TestIntervalIndex(unittest.TestCase):

    def test_agrees_with_decimal_comparison(self):
        index = IntervalIndex(NumberGrid(10 ** 9, 5))
        table = list(rules())
        for number, rule in enumerate(table):
            index.add(rule, number)
        for probe in PROBES:
            found = set()
            index.find(probe, found)
            self.assertEqual(
                {n for n, rule in enumerate(table)
                 if rule.matches(('n', probe))}, found, probe)

    def test_discard_removes_only_its_entry(self):
        index = IntervalIndex(NumberGrid(10 ** 9, 5))
        wide, narrow = Numeric(D(0), True), Numeric(D(1), True, D(2), True)
        index.add(wide, 'wide')
        index.add(narrow, 'narrow')
        index.discard(narrow, 'narrow')
        found = set()
        index.find(D('1.5'), found)
        self.assertEqual({'wide'}, found)
        index.discard(wide, 'wide')
        self.assertFalse(index)

    def test_grid_follows_the_configured_limits(self):
        grid = NumberGrid(10, 1)
        self.assertEqual(grid.point(D('0.1')) + 1, grid.point(D('0.15')))
        self.assertEqual(grid.point(D('100')), grid.point(D('11')))
        self.assertLess(grid.point(D('10')), grid.point(D('10.01')))


class TestRangeSet(unittest.TestCase):

    def test_agrees_with_decimal_comparison_below_and_above_small(self):
        table = list(rules())
        ranges = RangeSet(NumberGrid(10 ** 9, 5))
        for count in (1, RangeSet.SMALL, len(table)):
            for number in range(count):
                ranges.add(table[number], number)
            self.assertEqual(count > RangeSet.SMALL,
                             ranges.tree is not None)
            for probe in PROBES[::7]:
                found = set()
                ranges.find(('n', probe), found)
                self.assertEqual(
                    {n for n in range(count)
                     if table[n].matches(('n', probe))}, found, probe)

    def test_shrinking_drops_the_tree_at_half_small(self):
        table = list(rules())[:RangeSet.SMALL + 1]
        ranges = RangeSet(NumberGrid(10 ** 9, 5))
        for number, rule in enumerate(table):
            ranges.add(rule, number)
        for number, rule in enumerate(table[:-(RangeSet.SMALL // 2)]):
            self.assertIsNotNone(ranges.tree)
            ranges.discard(rule, number)
        self.assertIsNone(ranges.tree)
        for number, rule in enumerate(table):
            ranges.discard(rule, number)
        self.assertFalse(ranges)
