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

"""Misspelled names of our options and message fields.

Zaqar's subscription options are free-form and its HTTP layer drops unknown
message fields, so ``{"filter_policys": [...]}`` would be kept as an option
nobody reads, and the subscription would receive every message. A key that
is not one of our names but within a small edit distance of one is taken
for a misspelling of it and rejected; any other unknown key is left alone.
"""

from zaqar_filtering.policy.errors import InvalidPolicy

#: Edits (insertions, deletions, substitutions, swaps of neighbours) that a
#: key may be away from one of our names to count as its misspelling.
MAX_EDITS = 2
#: Names shorter than this allow one edit only.
SHORT_NAME = 8


def check_names(keys, names, option, rule, path=()):
    """Reject a key that looks like a misspelling of one of ``names``.

    Keys are compared ignoring case, ``-`` standing for ``_``; a key equal
    to a name is fine, and so is one far from every name.

    :param keys: the keys given (an options dict, a message).
    :param names: our names, most likely first.
    :param option: the option or field reported at fault; None to report
        the misspelled key itself.
    :param rule: the rule name of the error.
    :param path: where the keys are inside ``option``.
    :raises InvalidPolicy: naming the key and what it resembles.
    """
    for key in keys:
        if not isinstance(key, str) or key in names:
            continue
        close = misspelled(key, names)
        if close:
            raise InvalidPolicy(
                option or key, rule, 'did you mean %s? A key this close to '
                'a name zaqar-filtering reads is taken for a misspelling'
                % ' or '.join("'%s'" % name for name in close),
                path + (key,) if option else path)


def misspelled(key, names):
    """Return the names ``key`` could be a misspelling of, closest first."""
    folded = key.lower().replace('-', '_')
    found = []
    for name in names:
        most = MAX_EDITS if len(name) >= SHORT_NAME else 1
        distance = edit_distance(folded, name, most)
        if distance <= most:
            found.append((distance, name))
    return [name for _, name in sorted(found, key=lambda pair: pair[0])]


def edit_distance(a, b, most):
    """Return the optimal string alignment distance of ``a`` and ``b``.

    Levenshtein's edits plus swapping two neighbours; any distance above
    ``most`` is returned as ``most + 1``, which bounds the work by the
    length of the shorter string.
    """
    if abs(len(a) - len(b)) > most:
        return most + 1
    before, previous = None, list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, other in enumerate(b, 1):
            cost = char != other
            current[j] = min(previous[j] + 1, current[j - 1] + 1,
                             previous[j - 1] + cost)
            if (before is not None and j > 1 and char == b[j - 2]
                    and a[i - 2] == other):
                current[j] = min(current[j], before[j - 2] + 1)
        if min(current) > most:
            return most + 1
        before, previous = previous, current
    return min(previous[-1], most + 1)
