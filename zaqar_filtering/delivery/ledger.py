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

"""The ledger of pending webhook deliveries, and what it records.

Each pending delivery has a due time. :meth:`Ledger.claim` hands due ones
out under a lease: a claimed delivery is not due again until the lease
ends, and only the claim's holder can record its outcome. A process that
dies mid-delivery therefore delays that delivery by one lease, and never
has it delivered twice by two processes at once.

The ledger keeps the notify strategies' order rules: for an ``ordered``
strategy only a subscriber's oldest pending delivery is handed out; for a
``blocking`` one, once a retry has failed, only that delivery is, until it
succeeds or is dropped. Deliveries that must wait are parked, so that
claiming costs the same however many wait.
"""

import abc
import dataclasses

#: Outcomes a finished delivery is counted under.
DELIVERED = 'delivered'
DROPPED = 'dropped'
EXPIRED = 'expired'
OUTCOMES = (DELIVERED, DROPPED, EXPIRED)


@dataclasses.dataclass(frozen=True)
class NewDelivery:
    """What the notifier records for one subscription and its messages.

    :ivar bodies: the request bodies, one per message, in order.
    :ivar policy: the effective ``_retry_policy`` (for Zaqar's schedule).
    """
    project: str
    queue: str
    subscription_id: str
    subscriber: str
    headers: dict
    strategy: str
    policy: dict
    published: float
    deadline: float
    bodies: tuple


@dataclasses.dataclass(frozen=True)
class Delivery:
    """One claimed delivery of one message to one subscriber.

    :ivar attempts: failed attempts so far.
    :ivar token: the claim's lease token.
    """
    id: int
    project: str
    queue: str
    subscription_id: str
    subscriber: str
    headers: dict
    strategy: str
    policy: dict
    published: float
    deadline: float
    body: str
    attempts: int
    token: str


@dataclasses.dataclass(frozen=True)
class SubscriberStats:
    """What a subscription has pending and how its deliveries went.

    :ivar pending: messages waiting for or being retried for delivery
        (CMQ's "total number of messages associated with subscriber").
    :ivar retrying: those of them that failed at least once.
    :ivar last_error_at: seconds since the epoch, or None.
    """
    project: str
    queue: str
    subscription_id: str
    subscriber: str
    pending: int = 0
    retrying: int = 0
    delivered: int = 0
    dropped: int = 0
    expired: int = 0
    last_error: str = None
    last_error_at: float = None

    def as_dict(self):
        """Return the stats as a JSON-ready dict."""
        return dataclasses.asdict(self)


class Ledger(abc.ABC):
    """Pending webhook deliveries, in a store every server process shares.

    Methods raise :class:`~zaqar_filtering.store.base.StoreUnavailable`
    when the back end cannot answer.
    """

    @abc.abstractmethod
    def enqueue(self, new):
        """Record a :class:`NewDelivery`, due now (or parked if it waits)."""

    def enqueue_many(self, news):
        """Record several :class:`NewDelivery` (one post's), in order."""
        for new in news:
            self.enqueue(new)

    @abc.abstractmethod
    def claim(self, now, limit, lease_seconds):
        """Lease up to ``limit`` due deliveries.

        :returns: a list of :class:`Delivery`, oldest due first.
        """

    @abc.abstractmethod
    def retry(self, delivery, due, error, now):
        """Count a failed attempt and make the delivery due again at ``due``.

        :returns: False when the lease was lost (nothing is recorded).
        """

    @abc.abstractmethod
    def finish(self, delivery, outcome, error, now):
        """Remove a delivery, counted under ``outcome`` (see OUTCOMES).

        :param error: the last error, or None.
        :returns: False when the lease was lost (nothing is recorded).
        """

    @abc.abstractmethod
    def next_due(self):
        """Return when the next delivery is due (epoch seconds), or None."""

    @abc.abstractmethod
    def stats(self, project=None, queue=None, subscription_id=None):
        """Return :class:`SubscriberStats` of the subscriptions selected.

        Subscriptions without pending deliveries or counts are left out.
        """

    @abc.abstractmethod
    def forget(self, project, queue, subscription_id):
        """Drop a deleted subscription's pending deliveries and counts.

        :returns: how many pending deliveries were dropped.
        """
