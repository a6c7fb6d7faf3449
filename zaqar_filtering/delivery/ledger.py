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
succeeds or is dropped. Of the messages of an ordered queue that share an
ordering key (:attr:`Batch.keys`), whatever the strategy, only a
subscriber's oldest pending one is handed out: the next waits until that
one is delivered, dropped or expired. That per-key order replaces the
strategies' rules for messages with a key, so a failing key holds up
neither other keys nor the messages without a key; the strategies' rules
still apply among a subscriber's messages without a key. Deliveries that
must wait are parked, so that claiming costs the same however many wait.
"""

import abc
import collections
import dataclasses
import typing
from urllib import parse as urllib_parse

#: Outcomes a finished delivery is counted under.
DELIVERED = 'delivered'
DROPPED = 'dropped'
EXPIRED = 'expired'
OUTCOMES = (DELIVERED, DROPPED, EXPIRED)
#: A failed attempt, to be tried again at ``due``.
RETRIED = 'retried'

#: The subscriber URI schemes whose deliveries go through the ledger, and
#: so are counted in it. The others (mailto, trust+) are Zaqar's own
#: tasks, which keep no count.
TRACKED_SCHEMES = frozenset({'http', 'https', 'queue'})


def tracks(subscriber):
    """Return whether the ledger records deliveries to ``subscriber``."""
    return urllib_parse.urlsplit(subscriber).scheme in TRACKED_SCHEMES


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How an attempt went, for :meth:`Ledger.record`.

    :ivar event: one of OUTCOMES, or RETRIED.
    :ivar due: when to try again (RETRIED only).
    """
    delivery: object
    event: str
    error: str = None
    due: float = None
    now: float = 0.0


class Target(typing.NamedTuple):
    """One subscription of a :class:`Batch` and what it gets.

    A tuple (a post may have thousands; JSON encodes it as an array).

    :ivar bodies: index in ``Batch.bodies`` of its request bodies.
    :ivar headers: index in ``Batch.headers`` of its request headers.
    :ivar policy: index in ``Batch.policies`` of its effective
        ``_retry_policy`` (for Zaqar's schedule).
    """
    subscription_id: str
    subscriber: str
    strategy: str
    bodies: int = 0
    headers: int = 0
    policy: int = 0


class Targets(tuple):
    """:class:`Target` tuples that the batches of many posts share.

    The notifier prepares them once per set of subscriptions a post
    reaches; a ledger keeps what it derives from them (their encoding)
    with :func:`derived`, so that a post costs the same however many
    targets it has.
    """

    def derived(self, key, make):
        """Return ``make()``, computed once per ``key``."""
        memo = self.__dict__.setdefault('derived_by_key', {})
        found = memo.get(key)
        if found is None:
            found = memo[key] = make()
        return found


def derived(targets, key, make):
    """Return ``make()``, kept with ``targets`` if they are Targets."""
    if isinstance(targets, Targets):
        return targets.derived(key, make)
    return make()


@dataclasses.dataclass(frozen=True)
class Batch:
    """One post's webhook deliveries: its messages to each target.

    What several targets share (the request bodies, which differ only with
    a ``post_data`` template; headers; policies) is listed once.

    :ivar bodies: tuples of request bodies, one per message, in order.
    :ivar headers: dicts of request headers.
    :ivar policies: ``_retry_policy`` dicts.
    :ivar targets: :class:`Target` tuples (often :class:`Targets`).
    :ivar keys: the ordering key of each message (None for a message
        without one), when the queue is ordered by key; else empty.
    """
    project: str
    queue: str
    published: float
    deadline: float
    bodies: tuple
    headers: tuple
    policies: tuple
    targets: tuple
    keys: tuple = ()

    @property
    def size(self):
        """How many deliveries the batch holds."""
        per_bodies = derived(self.targets, 'per_bodies', lambda: tuple(
            collections.Counter(t.bodies for t in self.targets).items()))
        return sum(len(self.bodies[index]) * count
                   for index, count in per_bodies)


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
    def enqueue(self, batch):
        """Record a :class:`Batch` durably, in few round trips.

        Its deliveries are due at once (or parked if they must wait); a
        claim may first spread recorded batches into deliveries.
        """

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

    def record(self, outcomes):
        """Record several outcomes; return, for each, whether it was kept.

        :param outcomes: :class:`Outcome` tuples.
        """
        return [self.retry(o.delivery, o.due, o.error, o.now)
                if o.event == RETRIED else
                self.finish(o.delivery, o.event, o.error, o.now)
                for o in outcomes]

    @abc.abstractmethod
    def next_due(self):
        """Return when the next delivery is due (epoch seconds), or None.

        A batch still to be spread into deliveries is due now.
        """

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
