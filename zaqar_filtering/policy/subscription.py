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

"""The filter options of a subscription and what they accept.

A subscription may carry tags (``filter_policies``), binding keys
(``binding_keys``) and an SNS filter policy (``filter_policy`` with
``filter_policy_scope``). It receives a message only when every kind it has
accepts the message; with none of them it receives every message.
"""

import dataclasses

from zaqar_filtering.policy import attributes
from zaqar_filtering.policy import binding_key
from zaqar_filtering.policy.errors import InvalidPolicy
from zaqar_filtering.policy.limits import DEFAULT_LIMITS
from zaqar_filtering.policy import retry
from zaqar_filtering.policy import spelling
from zaqar_filtering.policy import tags
from zaqar_filtering.policy import values as v

TAGS = 'filter_policies'
BINDING_KEYS = 'binding_keys'
FILTER_POLICY = attributes.OPTION
FILTER_POLICY_SCOPE = attributes.SCOPE_OPTION
OPTIONS = (TAGS, BINDING_KEYS, FILTER_POLICY, FILTER_POLICY_SCOPE)
#: The option names a misspelled key is checked against.
NAMES = OPTIONS + (retry.OPTION,)


@dataclasses.dataclass(frozen=True)
class SubscriptionPolicy:
    """The parsed filter options of one subscription.

    :ivar tags: frozenset of tags, or None.
    :ivar binding_keys: frozenset of binding keys as word tuples, or None.
    :ivar filter_policy: an :class:`AttributePolicy`, or None.
    """
    tags: frozenset = None
    binding_keys: frozenset = None
    filter_policy: attributes.AttributePolicy = None

    @property
    def unfiltered(self):
        """True when the subscription receives every message."""
        return (self.tags is None and self.binding_keys is None
                and self.filter_policy is None)

    def matches(self, message):
        """Return whether a :class:`MessageView` is delivered.

        This is the reference rule, evaluated for this subscription alone;
        :class:`zaqar_filtering.Matcher` answers the same for many at once.
        """
        if self.tags is not None:
            if message.tags is None or self.tags.isdisjoint(message.tags):
                return False
        if self.binding_keys is not None:
            words = message.routing_key
            if words is None or not any(binding_key.key_matches(key, words)
                                        for key in self.binding_keys):
                return False
        if self.filter_policy is not None:
            return self.filter_policy.matches(
                scope_fields(self.filter_policy.scope, message))
        return True

    def explain(self, message):
        """Return why a :class:`MessageView` is not delivered, or None.

        None exactly when :meth:`matches` is true. Otherwise the reason
        names each kind that rejects the message, its key and the condition
        that failed, e.g. ``binding_keys: routing key 'audit.eu' matches
        none of [order.#]``; several kinds are separated by ``; ``.
        """
        reasons = []
        if self.tags is not None:
            reasons.append((TAGS, tags.explain(self.tags, message.tags)))
        if self.binding_keys is not None:
            reasons.append((BINDING_KEYS, binding_key.explain(
                self.binding_keys, message.routing_key)))
        if self.filter_policy is not None:
            reasons.append((FILTER_POLICY, self.filter_policy.explain(
                scope_fields(self.filter_policy.scope, message))))
        return '; '.join('%s: %s' % (kind, reason)
                         for kind, reason in reasons if reason) or None


def scope_fields(scope, message):
    """Return the fields of a :class:`MessageView` that a scope reads."""
    if scope == attributes.MESSAGE_BODY:
        return message.body
    return message.attributes


def parse_options(options, limits=DEFAULT_LIMITS):
    """Return the :class:`SubscriptionPolicy` of a subscription's options.

    Other options are Zaqar's or the user's, except a misspelling of ours
    (see :mod:`zaqar_filtering.policy.spelling`), which is rejected.

    :raises InvalidPolicy: naming the option, the value and the rule.
    """
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise InvalidPolicy('options', 'options_type', 'must be a JSON '
                            'object, not %s' % v.describe(options))
    spelling.check_names(options, NAMES, None, 'option_name')
    scope = attributes.parse_scope(options.get(FILTER_POLICY_SCOPE))
    return SubscriptionPolicy(
        tags=tags.parse_tags(options.get(TAGS), TAGS, limits),
        binding_keys=binding_key.parse_binding_keys(
            options.get(BINDING_KEYS), BINDING_KEYS, limits),
        filter_policy=attributes.parse_filter_policy(
            options.get(FILTER_POLICY), scope, limits))


def validate_options(options, limits=DEFAULT_LIMITS):
    """Validate a subscription's options and return them normalized.

    The ``notify_strategy`` of ``_retry_policy`` is checked too (see
    :mod:`zaqar_filtering.policy.retry`). Options other than the filter
    options are returned untouched. Tags and
    binding keys become sorted lists of distinct values; an empty or null
    filter option is dropped, as it means "no filter".

    :param options: the subscription's ``options`` (a dict, or None).
    :param limits: a :class:`Limits`.
    :returns: a new dict.
    :raises InvalidPolicy: naming the option, the value and the rule.
    """
    policy = parse_options(options, limits)
    retry.validate_retry_policy((options or {}).get(retry.OPTION))
    normalized = {key: value for key, value in (options or {}).items()
                  if key not in OPTIONS}
    if policy.tags is not None:
        normalized[TAGS] = sorted(policy.tags)
    if policy.binding_keys is not None:
        normalized[BINDING_KEYS] = sorted(
            binding_key.join(key) for key in policy.binding_keys)
    if policy.filter_policy is not None:
        normalized[FILTER_POLICY] = options[FILTER_POLICY]
    if options and options.get(FILTER_POLICY_SCOPE) is not None:
        normalized[FILTER_POLICY_SCOPE] = options[FILTER_POLICY_SCOPE]
    return normalized
