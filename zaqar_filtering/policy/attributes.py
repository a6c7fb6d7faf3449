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

"""Amazon SNS filter policies (``filter_policy`` and ``filter_policy_scope``).

A policy maps attribute names (or, in ``MessageBody`` scope, paths into the
JSON body) to lists of rules. It accepts a message when every key accepts
it (AND) and a key accepts it when any of its rules matches any value at
that key (OR); ``$or`` lists alternative sub-policies. The parser expands a
policy into branches (a disjunction of conjunctions), which SNS's
combination limit keeps small.

Error texts carry SNS's own wording (``Unrecognized match type ...``) so
that users of SNS recognise them, prefixed with where the fault is.
"""

import dataclasses
import decimal
import ipaddress
import json

from zaqar_filtering.policy.errors import InvalidPolicy
from zaqar_filtering.policy import values as v

OPTION = 'filter_policy'
SCOPE_OPTION = 'filter_policy_scope'
MESSAGE_ATTRIBUTES = 'MessageAttributes'
MESSAGE_BODY = 'MessageBody'
SCOPES = (MESSAGE_ATTRIBUTES, MESSAGE_BODY)
OR = '$or'


# Rules. Each matches one typed value; Exists is decided per key.

@dataclasses.dataclass(frozen=True)
class Exact:
    """Equal to a string, number, boolean or null."""
    value: tuple

    def matches(self, value):
        return value == self.value

    def wanted(self):
        return show(self.value)


@dataclasses.dataclass(frozen=True)
class Prefix:
    """A string that starts with ``text``."""
    text: str

    def matches(self, value):
        return value[0] == v.STRING and value[1].startswith(self.text)

    def wanted(self):
        return 'prefix %s' % v.describe(self.text)


@dataclasses.dataclass(frozen=True)
class Suffix:
    """A string that ends with ``text``."""
    text: str

    def matches(self, value):
        return value[0] == v.STRING and value[1].endswith(self.text)

    def wanted(self):
        return 'suffix %s' % v.describe(self.text)


@dataclasses.dataclass(frozen=True)
class EqualsIgnoreCase:
    """A string equal to ``folded`` after case folding."""
    folded: str

    def matches(self, value):
        return value[0] == v.STRING and value[1].casefold() == self.folded

    def wanted(self):
        return 'equals-ignore-case %s' % v.describe(self.folded)


@dataclasses.dataclass(frozen=True)
class AnythingBut:
    """A string or number not among ``values``, or not starting with prefix.

    Against an array it matches when any element does (SNS's docs disagree
    between versions; this is the reading LocalStack implements).
    """
    values: frozenset = frozenset()
    prefix: str = None

    def matches(self, value):
        if self.prefix is not None:
            return (value[0] == v.STRING
                    and not value[1].startswith(self.prefix))
        return value[0] in (v.STRING, v.NUMBER) and value not in self.values

    def wanted(self):
        if self.prefix is not None:
            return 'anything-but prefix %s' % v.describe(self.prefix)
        return 'anything-but %s' % show_list(sorted(self.values, key=str))


@dataclasses.dataclass(frozen=True)
class Numeric:
    """A number within the bounds; None is an open end."""
    low: decimal.Decimal = None
    low_inclusive: bool = False
    high: decimal.Decimal = None
    high_inclusive: bool = False

    def matches(self, value):
        if value[0] != v.NUMBER:
            return False
        number = value[1]
        if self.low is not None and (
                number < self.low if self.low_inclusive
                else number <= self.low):
            return False
        if self.high is not None and (
                number > self.high if self.high_inclusive
                else number >= self.high):
            return False
        return True

    def wanted(self):
        if self.low == self.high and self.low is not None:
            return '= %s' % self.low
        bounds = []
        if self.low is not None:
            bounds.append('%s %s' % ('>=' if self.low_inclusive else '>',
                                     self.low))
        if self.high is not None:
            bounds.append('%s %s' % ('<=' if self.high_inclusive else '<',
                                     self.high))
        return ' and '.join(bounds)


@dataclasses.dataclass(frozen=True)
class Exists:
    """The key has (``True``) or lacks (``False``) a non-null value.

    It is decided per key (see :meth:`Condition.matches`), not per value.
    """
    flag: bool

    def wanted(self):
        return 'exists' if self.flag else 'exists false'


@dataclasses.dataclass(frozen=True)
class Cidr:
    """A string holding an IP address within ``network``."""
    network: object

    def matches(self, value):
        address = ip_address(value)
        return (address is not None
                and address.version == self.network.version
                and address in self.network)

    def wanted(self):
        return 'cidr %s' % self.network


def ip_address(value):
    """Return the IP address a typed string value holds, or None."""
    if value[0] != v.STRING:
        return None
    try:
        return ipaddress.ip_address(value[1])
    except ValueError:
        return None


@dataclasses.dataclass(frozen=True)
class Condition:
    """The rules of one key: any rule matching any value accepts."""
    path: str
    rules: tuple

    def matches(self, found):
        """``found`` is the tuple of typed values at ``path`` (maybe empty)."""
        present = any(value[0] != v.NULL for value in found)
        for rule in self.rules:
            if isinstance(rule, Exists):
                if rule.flag == present:
                    return True
            elif any(rule.matches(value) for value in found):
                return True
        return False

    def explain(self, found, scope):
        """Return why the values ``found`` at ``path`` fail; see matches."""
        if len(self.rules) == 1:
            wanted = self.rules[0].wanted()
        else:
            wanted = 'any of [%s]' % ', '.join(rule.wanted()
                                               for rule in self.rules)
        if not found:
            return 'the message %s no %s (the policy wants %s)' % (
                'has' if scope == MESSAGE_ATTRIBUTES else 'body has',
                'attribute ' + self.path if scope == MESSAGE_ATTRIBUTES
                else 'field ' + self.path, wanted)
        shown = show(found[0]) if len(found) == 1 else show_list(found)
        if self.rules == (Exists(False),):
            return '%s is %s but the policy wants it absent' % (self.path,
                                                                shown)
        if self.rules == (Exists(True),):
            return '%s is %s but the policy wants it to exist' % (
                self.path, shown)
        if (all(isinstance(rule, Numeric) for rule in self.rules)
                and not any(value[0] == v.NUMBER for value in found)):
            return '%s %s is not a number (the policy wants %s)' % (
                self.path, shown, wanted)
        return '%s %s is not %s' % (self.path, shown, wanted)


@dataclasses.dataclass(frozen=True)
class AttributePolicy:
    """A parsed filter policy: accepted when all conditions of a branch hold.

    ``scope`` says whether paths address the message attributes or its JSON
    body.
    """
    scope: str
    branches: tuple

    def matches(self, fields):
        """``fields`` maps a path to the tuple of typed values found there."""
        return any(branch_matches(branch, fields) for branch in self.branches)

    def explain(self, fields):
        """Return why ``fields`` are not accepted, or None when they are.

        It names every failing condition of a policy without alternatives;
        with alternatives (``$or``), the failing conditions they all share,
        else the failures of each alternative.
        """
        failures = []
        for branch in self.branches:
            failed = [condition for condition in branch
                      if not condition.matches(fields.get(condition.path, ()))]
            if not failed:
                return None
            failures.append(failed)
        shared = [condition for condition in failures[0]
                  if all(condition in failed for failed in failures[1:])]
        if shared:
            return self._describe(shared, fields)
        shown = ['(%d) %s' % (i, self._describe(failed, fields))
                 for i, failed in enumerate(failures[:MAX_ALTERNATIVES], 1)]
        more = len(failures) - len(shown)
        return 'no alternative matches: %s%s' % (
            '; '.join(shown), '; and %d more' % more if more else '')

    def _describe(self, conditions, fields):
        return ' and '.join(condition.explain(fields.get(condition.path, ()),
                                              self.scope)
                            for condition in conditions)


#: The alternatives of a policy an explanation describes at most.
MAX_ALTERNATIVES = 3


def show(value):
    """Return a typed value as its JSON text, a string in single quotes."""
    kind, payload = value
    if kind == v.STRING:
        return v.describe(payload)
    if kind == v.BOOLEAN:
        return 'true' if payload else 'false'
    if kind == v.NULL:
        return 'null'
    return str(payload)


def show_list(values, most=10):
    """Return typed values as ``[a, b]``, up to ``most`` of them."""
    shown = [show(value) for value in values[:most]]
    if len(values) > most:
        shown.append('... %d more' % (len(values) - most))
    return '[%s]' % ', '.join(shown)


def branch_matches(branch, fields):
    """Return whether every condition of ``branch`` holds on ``fields``."""
    return all(condition.matches(fields.get(condition.path, ()))
               for condition in branch)


def parse_scope(value):
    """Return the scope named by ``value`` (None means the default)."""
    if value is None:
        return MESSAGE_ATTRIBUTES
    if value not in SCOPES:
        raise InvalidPolicy(SCOPE_OPTION, 'scope',
                            'must be "MessageAttributes" or "MessageBody", '
                            'not %s' % v.describe(value))
    return value


def parse_filter_policy(policy, scope, limits):
    """Parse and validate an SNS filter policy.

    :param policy: the policy as a JSON object (a dict).
    :param scope: ``MessageAttributes`` or ``MessageBody``.
    :param limits: a :class:`Limits`.
    :returns: an :class:`AttributePolicy`, or None for an empty policy.
    :raises InvalidPolicy: naming the path, the value and the broken rule.
    """
    if policy is None:
        return None
    if not isinstance(policy, dict):
        hint = ('; give the policy itself, not its JSON text'
                if isinstance(policy, str) else '')
        raise InvalidPolicy(OPTION, 'policy_type',
                            'must be a JSON object, not %s%s'
                            % (v.describe(policy), hint))
    _check_size(policy, limits)
    if not policy:
        return None
    parser = _Parser(limits)
    branches, _ = parser.parse_object(policy, (), 1, ())
    if parser.nested_at is not None and scope == MESSAGE_ATTRIBUTES:
        raise InvalidPolicy(OPTION, 'nested_policy',
                            'Filter policy scope MessageAttributes does not '
                            'support nested filter policy; set %s to %s to '
                            'filter on the message body'
                            % (SCOPE_OPTION, MESSAGE_BODY),
                            parser.nested_at)
    if len(parser.leaf_paths) > limits.max_policy_keys:
        raise InvalidPolicy(OPTION, 'too_many_keys',
                            'Filter policy can not have more than %d keys; '
                            'it has %d: %s'
                            % (limits.max_policy_keys, len(parser.leaf_paths),
                               ', '.join(sorted(parser.leaf_paths))))
    return AttributePolicy(scope, tuple(tuple(b) for b in branches))


def _check_size(policy, limits):
    try:
        text = json.dumps(policy, separators=(',', ':'), ensure_ascii=False,
                          allow_nan=False)
    except RecursionError:
        raise InvalidPolicy(OPTION, 'too_complex',
                            'Filter policy is too complex: nested too deeply')
    except (TypeError, ValueError) as exc:
        raise InvalidPolicy(OPTION, 'policy_type',
                            'is not a JSON object: %s' % exc)
    size = len(text.encode('utf-8', 'surrogatepass'))
    if size > limits.max_policy_bytes:
        raise InvalidPolicy(OPTION, 'policy_bytes',
                            'the policy has %d bytes of JSON; the limit is %d'
                            % (size, limits.max_policy_bytes))


class _Parser:
    """One parse: collects the leaf paths and where nesting occurs."""

    def __init__(self, limits):
        self.limits = limits
        self.leaf_paths = set()
        self.nested_at = None

    def fail(self, rule, detail, at):
        raise InvalidPolicy(OPTION, rule, detail, at)

    def parse_object(self, obj, keys, depth, at):
        """Return (branches, combinations) of a JSON object of keys.

        Combinations are counted as SNS does: the product over keys, each
        leaf list counting (number of values x nesting depth) and ``$or``
        alternatives adding up.
        """
        if not obj:
            self.fail('empty_object', 'Empty objects are not allowed', at)
        if depth > self.limits.max_policy_combinations:
            self.fail('too_complex', 'Filter policy is too complex: '
                      'nested more than %d levels deep'
                      % self.limits.max_policy_combinations, at)
        branches, combinations = [[]], 1
        for key, value in obj.items():
            where = at + (key,)
            if not isinstance(key, str):
                self.fail('key_type', 'key %s is not a string'
                          % v.describe(key), at)
            if key == OR:
                alternatives, count = self.parse_or(value, keys, depth, where)
            elif isinstance(value, dict):
                if self.nested_at is None:
                    self.nested_at = where
                alternatives, count = self.parse_object(
                    value, keys + (key,), depth + 1, where)
            elif isinstance(value, list):
                count = len(value) * depth
                self.check_combinations(combinations * count, where)
                path = '.'.join(keys + (key,))
                self.leaf_paths.add(path)
                condition = Condition(path, self.parse_rules(value, where))
                alternatives = [[condition]]
            else:
                self.fail('not_object_or_array',
                          '"%s" must be an object or an array, not %s'
                          % (key, v.describe(value)), where)
            combinations *= count
            self.check_combinations(combinations, where)
            branches = [b + a for b in branches for a in alternatives]
        return branches, combinations

    def parse_or(self, value, keys, depth, at):
        if not isinstance(value, list) or not value:
            self.fail('or_type', '"$or" must be a non-empty array of objects,'
                      ' not %s' % v.describe(value), at)
        branches, combinations = [], 0
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                self.fail('or_type', '"$or" must be a non-empty array of '
                          'objects, not %s' % v.describe(item), at + (i,))
            alternatives, count = self.parse_object(item, keys, depth,
                                                    at + (i,))
            branches += alternatives
            combinations += count
            self.check_combinations(combinations, at + (i,))
        return branches, combinations

    def check_combinations(self, combinations, at):
        if combinations > self.limits.max_policy_combinations:
            self.fail('too_complex',
                      'Filter policy is too complex: %s value combinations;'
                      ' the limit is %d'
                      % ('more than %d' % self.limits.max_policy_combinations
                         if combinations > 10 ** 6 else combinations,
                         self.limits.max_policy_combinations), at)

    def parse_rules(self, items, at):
        if not items:
            self.fail('empty_array', 'Empty arrays are not allowed', at)
        return tuple(self.parse_rule(item, at + (i,))
                     for i, item in enumerate(items))

    def parse_rule(self, item, at):
        if isinstance(item, dict):
            if len(item) != 1:
                self.fail('match_expression',
                          'Only one key allowed in match expression'
                          if item else 'Empty objects are not allowed', at)
            (operator, operand), = item.items()
            parse = self.OPERATORS.get(operator)
            if parse is None:
                self.fail('unknown_operator',
                          'Unrecognized match type %s' % operator, at)
            return parse(self, operand, at + (operator,))
        value = v.from_json(item)
        if value is None:
            self.fail('match_value', 'Match value must be String, number, '
                      'true, false, or null, not %s' % v.describe(item), at)
        if value[0] == v.NUMBER:
            self.parse_number(item, at, 'Match value')
        return Exact(value)

    def parse_number(self, value, at, what):
        number = v.number_from_json(value)
        if number is None:
            self.fail('number_type', '%s must be numeric, not %s'
                      % (what, v.describe(value)), at)
        limit = self.limits.max_policy_number
        if abs(number) > limit:
            self.fail('number_range', 'number %s is outside the range -%d to'
                      ' %d' % (v.describe(value), limit, limit), at)
        decimals = -number.normalize().as_tuple().exponent
        if decimals > self.limits.max_policy_decimals:
            self.fail('number_precision', 'number %s has %d decimals; the '
                      'limit is %d' % (v.describe(value), decimals,
                                       self.limits.max_policy_decimals), at)
        return number

    def string_operand(self, name, operand, at):
        if not isinstance(operand, str):
            self.fail('pattern_type', '%s match pattern must be a string, '
                      'not %s' % (name, v.describe(operand)), at)
        return operand

    def parse_prefix(self, operand, at):
        return Prefix(self.string_operand('prefix', operand, at))

    def parse_suffix(self, operand, at):
        return Suffix(self.string_operand('suffix', operand, at))

    def parse_equals_ignore_case(self, operand, at):
        return EqualsIgnoreCase(
            self.string_operand('equals-ignore-case', operand, at).casefold())

    def parse_exists(self, operand, at):
        if not isinstance(operand, bool):
            self.fail('pattern_type', 'exists match pattern must be either '
                      'true or false. Got %s' % v.describe(operand), at)
        return Exists(operand)

    def parse_anything_but(self, operand, at):
        if isinstance(operand, dict):
            if len(operand) != 1:
                self.fail('match_expression',
                          'Only one key allowed in match expression', at)
            (name, value), = operand.items()
            if name != 'prefix':
                self.fail('unknown_operator',
                          'Unsupported anything-but pattern: %s' % name, at)
            prefix = self.string_operand('prefix', value, at + (name,))
            if not prefix:
                self.fail('pattern_type', 'anything-but prefix must not be '
                          'empty: it would exclude every string', at)
            return AnythingBut(prefix=prefix)
        items = operand if isinstance(operand, list) else [operand]
        if not items:
            self.fail('empty_array', 'Empty arrays are not allowed', at)
        excluded = set()
        for i, item in enumerate(items):
            where = at + (i,) if isinstance(operand, list) else at
            if isinstance(item, str):
                excluded.add((v.STRING, item))
            elif v.number_from_json(item) is not None:
                excluded.add((v.NUMBER, self.parse_number(item, where,
                                                          'anything-but')))
            else:
                self.fail('pattern_type', 'Value of anything-but must be an '
                          'array or single string/number value, not %s'
                          % v.describe(item), where)
        return AnythingBut(values=frozenset(excluded))

    def parse_numeric(self, operand, at):
        if not isinstance(operand, list):
            self.fail('numeric_syntax', 'Value of numeric must be an array, '
                      'not %s' % v.describe(operand), at)
        if not operand:
            self.fail('numeric_syntax', 'Invalid member in numeric match: ]',
                      at)
        first = operand[0]
        if not isinstance(first, str):
            self.fail('numeric_syntax', 'Invalid member in numeric match: %s'
                      % v.describe(first), at)
        if first not in _NUMERIC_OPERATORS:
            self.fail('numeric_syntax',
                      'Unrecognized numeric range operator: %s' % first, at)
        low = self.numeric_value(operand, 1, at)
        if first == '=':
            bounds = dict(low=low, low_inclusive=True,
                          high=low, high_inclusive=True)
        elif first in ('<', '<='):
            bounds = dict(high=low, high_inclusive=first == '<=')
        else:
            bounds = dict(low=low, low_inclusive=first == '>=')
        if first in ('=', '<', '<=') or len(operand) == 2:
            if len(operand) > 2:
                self.fail('numeric_syntax',
                          'Too many elements in numeric expression', at)
            return Numeric(**bounds)
        second = operand[2]
        if not isinstance(second, str):
            self.fail('numeric_syntax', 'Bad value in numeric range: %s'
                      % v.describe(second), at)
        if second not in ('<', '<='):
            self.fail('numeric_syntax',
                      'Bad numeric range operator: %s' % second, at)
        high = self.numeric_value(operand, 3, at)
        if len(operand) > 4:
            self.fail('numeric_syntax',
                      'Too many terms in numeric range expression', at)
        if not low < high:
            self.fail('numeric_range', 'Bottom must be less than top: %s is '
                      'not below %s' % (low, high), at)
        return Numeric(high=high, high_inclusive=second == '<=', **bounds)

    def numeric_value(self, operand, i, at):
        name = _NUMERIC_OPERATORS[operand[i - 1]]
        if i >= len(operand):
            self.fail('numeric_syntax', 'Value of %s must be numeric, but '
                      'the expression ends after %s' % (name, operand[i - 1]),
                      at)
        if v.number_from_json(operand[i]) is None:
            self.fail('numeric_syntax', 'Value of %s must be numeric, not %s'
                      % (name, v.describe(operand[i])), at + (i,))
        return self.parse_number(operand[i], at + (i,), 'Value of ' + name)

    def parse_cidr(self, operand, at):
        text = self.string_operand('cidr', operand, at)
        if text.count('/') != 1:
            self.fail('cidr', "Malformed CIDR, one '/' required", at)
        address, bits = text.split('/')
        if not bits.isdigit() or not bits.isascii():
            self.fail('cidr', 'Malformed CIDR, mask bits must be an integer',
                      at)
        try:
            address = ipaddress.ip_address(address)
        except ValueError:
            self.fail('cidr', 'Nonstandard IP address: %s' % address, at)
        if int(bits) > address.max_prefixlen:
            self.fail('cidr', 'Malformed CIDR, mask bits must be at most %d '
                      'for %s' % (address.max_prefixlen, address), at)
        return Cidr(ipaddress.ip_network('%s/%s' % (address, bits),
                                         strict=False))

    OPERATORS = {
        'prefix': parse_prefix,
        'suffix': parse_suffix,
        'equals-ignore-case': parse_equals_ignore_case,
        'anything-but': parse_anything_but,
        'numeric': parse_numeric,
        'exists': parse_exists,
        'cidr': parse_cidr,
    }


_NUMERIC_OPERATORS = {'=': 'equals', '<': '<', '<=': '<=', '>': '>',
                      '>=': '>='}
