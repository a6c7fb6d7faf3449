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

"""Value indexes for SNS filter policies, one per scope.

Each branch of a policy is indexed under one "driver" condition, chosen
among those whose rules can be looked up (exact values, case-folded values,
prefixes, suffixes, numeric ranges, CIDR blocks, ``exists: true``): the one
whose index buckets hold the fewest entries when the branch is added, so a
value that every subscription shares (``"status": ["paid"]``) does not
become the lookup key of them all. A message's values look the drivers up
by key, so the cost follows the message and the branches it hits, not the
number of policies; the matcher then checks each hit in full. Branches with
no such condition (only ``anything-but`` or ``exists: false``) are checked
for every message.
"""

import collections

from zaqar_filtering.index.interval_index import IntervalIndex
from zaqar_filtering.policy import attributes as a
from zaqar_filtering.policy import values as v

# How widely a rule tends to match, to break ties between drivers.
_BREADTH = {a.Exact: 0, a.EqualsIgnoreCase: 0, a.Cidr: 1, a.Prefix: 1,
            a.Suffix: 1, a.Numeric: 1, a.Exists: 2}


def _can_drive(condition):
    """Return whether the condition can be a driver.

    It can when every message it accepts has a value that one of its rules
    is indexed under.
    """
    return all(type(rule) in _BREADTH
               and not (type(rule) is a.Exists and not rule.flag)
               for rule in condition.rules)


class _PathIndex:
    """Driver rules on one path, keyed so that a value looks them up."""

    def __init__(self, grid):
        self.exact = {}
        self.folded = {}
        self.prefixes = {}
        self.suffixes = {}
        self.networks = {}
        # Prefix and suffix lengths and CIDR masks in use: a value is looked
        # up once per distinct length or mask.
        self.prefix_lengths = collections.Counter()
        self.suffix_lengths = collections.Counter()
        self.masks = collections.Counter()
        self.numeric = IntervalIndex(grid)
        self.numeric_count = 0
        self.exists = set()

    def __bool__(self):
        return bool(self.exact or self.folded or self.prefixes
                    or self.suffixes or self.networks or self.numeric_count
                    or self.exists)

    def load(self, rule):
        """Return how many entries share the rule's bucket now."""
        kind = type(rule)
        if kind is a.Numeric:
            return self.numeric_count
        if kind is a.Exists:
            return len(self.exists)
        table, key = self._bucket(rule)
        return len(table.get(key, ()))

    def add(self, rule, entry):
        self._count(rule, 1)
        kind = type(rule)
        if kind is a.Numeric:
            self.numeric.add(rule, entry)
        elif kind is a.Exists:
            self.exists.add(entry)
        else:
            table, key = self._bucket(rule)
            table.setdefault(key, set()).add(entry)

    def discard(self, rule, entry):
        self._count(rule, -1)
        kind = type(rule)
        if kind is a.Numeric:
            self.numeric.discard(rule, entry)
        elif kind is a.Exists:
            self.exists.discard(entry)
        else:
            table, key = self._bucket(rule)
            entries = table.get(key)
            if entries is not None:
                entries.discard(entry)
                if not entries:
                    del table[key]

    def _bucket(self, rule):
        kind = type(rule)
        if kind is a.Exact:
            return self.exact, rule.value
        if kind is a.EqualsIgnoreCase:
            return self.folded, rule.folded
        if kind is a.Prefix:
            return self.prefixes, rule.text
        if kind is a.Suffix:
            return self.suffixes, rule.text
        return self.networks, _network_key(rule.network)

    def _count(self, rule, step):
        kind = type(rule)
        if kind is a.Numeric:
            self.numeric_count += step
            return
        if kind is a.Prefix:
            counter, key = self.prefix_lengths, len(rule.text)
        elif kind is a.Suffix:
            counter, key = self.suffix_lengths, len(rule.text)
        elif kind is a.Cidr:
            counter, key = self.masks, _network_key(rule.network)[0]
        else:
            return
        counter[key] += step
        if not counter[key]:
            del counter[key]

    def find(self, found, out):
        """Add to ``out`` the entries whose driver rule a value matches."""
        exact, folded = self.exact, self.folded
        present = False
        for value in found:
            kind = value[0]
            if kind != v.NULL:
                present = True
            hit = exact.get(value)
            if hit:
                out.update(hit)
            if kind == v.STRING:
                text = value[1]
                if folded:
                    hit = folded.get(text.casefold())
                    if hit:
                        out.update(hit)
                size = len(text)
                for length in self.prefix_lengths:
                    if length <= size:
                        hit = self.prefixes.get(text[:length])
                        if hit:
                            out.update(hit)
                for length in self.suffix_lengths:
                    if length <= size:
                        hit = self.suffixes.get(text[size - length:])
                        if hit:
                            out.update(hit)
                if self.masks:
                    self._find_network(value, out)
            elif kind == v.NUMBER and self.numeric_count:
                self.numeric.find(value[1], out)
        if present and self.exists:
            out.update(self.exists)

    def _find_network(self, value, out):
        address = a.ip_address(value)
        if address is None:
            return
        number = int(address)
        for mask in self.masks:
            version, prefixlen = mask
            if version == address.version:
                shift = address.max_prefixlen - prefixlen
                hit = self.networks.get((mask, number >> shift << shift))
                if hit:
                    out.update(hit)


def _network_key(network):
    return ((network.version, network.prefixlen),
            int(network.network_address))


class AttributeIndex:
    """The filter policies of one scope, indexed by driver condition."""

    def __init__(self, grid):
        self.grid = grid
        self.paths = {}
        self.always = set()
        self.drivers = {}

    def __bool__(self):
        return bool(self.paths or self.always)

    def add(self, sub_id, policy):
        """Index every branch of ``policy`` for ``sub_id``."""
        for number, branch in enumerate(policy.branches):
            entry = (sub_id, number)
            driver = self._choose_driver(branch)
            self.drivers[entry] = driver
            if driver is None:
                self.always.add(entry)
                continue
            path_index = self.paths.get(driver.path)
            if path_index is None:
                path_index = self.paths[driver.path] = _PathIndex(self.grid)
            for rule in driver.rules:
                path_index.add(rule, entry)

    def discard(self, sub_id, policy):
        """Undo :meth:`add`."""
        for number in range(len(policy.branches)):
            entry = (sub_id, number)
            driver = self.drivers.pop(entry)
            if driver is None:
                self.always.discard(entry)
                continue
            path_index = self.paths[driver.path]
            for rule in driver.rules:
                path_index.discard(rule, entry)
            if not path_index:
                del self.paths[driver.path]

    def find(self, fields, out):
        """Add to ``out`` the subscriptions whose driver conditions hold.

        :param fields: dict of path -> tuple of typed values.
        """
        entries = set(self.always)
        paths = self.paths
        for path, found in fields.items():
            path_index = paths.get(path)
            if path_index is not None:
                path_index.find(found, entries)
        out.update(sub_id for sub_id, _ in entries)

    def _choose_driver(self, branch):
        best, best_cost = None, None
        for condition in branch:
            if not _can_drive(condition):
                continue
            path_index = self.paths.get(condition.path)
            load = (sum(path_index.load(rule) for rule in condition.rules)
                    if path_index is not None else 0)
            breadth = max(_BREADTH[type(rule)] for rule in condition.rules)
            cost = (load, breadth, len(condition.rules))
            if best_cost is None or cost < best_cost:
                best, best_cost = condition, cost
        return best
