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

"""What the policy store keeps of one subscription (pure, no I/O)."""

import dataclasses
import datetime
import hashlib
import json

from zaqar_filtering.policy.limits import DEFAULT_LIMITS
from zaqar_filtering.policy import subscription as sub_options

#: Kind names, by the option that gives a subscription that kind.
KINDS = {sub_options.TAGS: 'tags',
         sub_options.BINDING_KEYS: 'binding_keys',
         sub_options.FILTER_POLICY: 'filter_policy'}


@dataclasses.dataclass(frozen=True)
class PolicyRecord:
    """The normalized filter policy of one subscription.

    :ivar project: the project (tenant) id, or None without auth.
    :ivar queue: the queue name.
    :ivar subscription_id: Zaqar's subscription id, as a string.
    :ivar subscriber: the subscriber URI.
    :ivar policy: the normalized filter options only ({} for none).
    :ivar kinds: sorted tuple of the policy kinds present.
    :ivar expires: when the subscription expires (aware UTC datetime,
        whole seconds), or None when not known.
    :ivar hash: hex digest of the policy (canonical JSON), to compare
        policies without comparing documents.
    """
    project: str
    queue: str
    subscription_id: str
    subscriber: str
    policy: dict
    kinds: tuple
    expires: datetime.datetime
    hash: str

    @property
    def key(self):
        """The record's identity: (project, queue, subscription_id)."""
        return self.project, self.queue, self.subscription_id

    def same_as(self, other):
        """Return whether writing ``other`` over this record changes nothing.

        Expiry times within a second are the same: Zaqar lists a
        subscription's age in whole seconds.
        """
        if (self.key != other.key or self.hash != other.hash
                or self.subscriber != other.subscriber):
            return False
        if self.expires is None or other.expires is None:
            return self.expires is other.expires
        return abs((self.expires - other.expires).total_seconds()) <= 1


def build_record(project, queue, subscription_id, subscriber, options,
                 expires=None, limits=DEFAULT_LIMITS):
    """Validate a subscription's options and return its :class:`PolicyRecord`.

    :param expires: an aware datetime or None.
    :raises InvalidPolicy: as :func:`zaqar_filtering.validate_options`.
    """
    normalized = sub_options.validate_options(options, limits)
    policy = {key: normalized[key] for key in sub_options.OPTIONS
              if key in normalized}
    kinds = tuple(sorted(KINDS[key] for key in policy if key in KINDS))
    if expires is not None:
        expires = expires.astimezone(datetime.timezone.utc).replace(
            microsecond=0)
    digest = hashlib.sha256(policy_json(policy).encode('utf-8')).hexdigest()
    return PolicyRecord(project, queue, str(subscription_id), subscriber,
                        policy, kinds, expires, digest)


def policy_json(policy):
    """Return the canonical JSON text of a normalized policy."""
    return json.dumps(policy, sort_keys=True, separators=(',', ':'),
                      ensure_ascii=False)


def record_from_listing(project, queue, subscription, now,
                        limits=DEFAULT_LIMITS):
    """Return the record of a subscription as Zaqar's controllers list it.

    :param subscription: a dict with ``id``, ``subscriber``, ``options``,
        ``ttl`` and ``age`` (seconds), as Zaqar's ``list`` and ``get``
        return it.
    :param now: the current time, an aware datetime.
    """
    expires = now + datetime.timedelta(
        seconds=subscription['ttl'] - subscription['age'])
    return build_record(project, queue, subscription['id'],
                        subscription['subscriber'],
                        subscription.get('options'), expires, limits)
