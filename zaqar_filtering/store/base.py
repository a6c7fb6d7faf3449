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

"""The policy store interface that both drivers implement."""

import abc
import dataclasses


class StoreUnavailable(Exception):
    """The policy store could not be reached or did not answer in time."""

    def __init__(self, store, reason):
        super().__init__('policy store %s is unavailable: %s'
                         % (store, reason))
        self.store = store
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class WriteResult:
    """What :meth:`PolicyStore.write` did."""
    written: int = 0
    unchanged: int = 0


class PolicyStore(abc.ABC):
    """Where the filter policies of subscriptions are kept.

    Zaqar's subscription is the source of truth: users read its options
    back through Zaqar's API, and the notifier matches with them. A store
    keeps, per queue, a version that every change moves, so that every
    server process rebuilds its matcher for the next post, and may keep a
    copy of each subscription's normalized policy (a
    :class:`~zaqar_filtering.store.record.PolicyRecord`) for operators and
    the backfill job. Every query is scoped by project.

    Methods raise :class:`StoreUnavailable` when the store cannot answer.
    """

    #: Name of the driver, as ``[filtering] policy_store`` spells it.
    name = None
    #: Whether the store keeps records of its own (``write`` and
    #: ``load`` do something).
    keeps_records = True

    @abc.abstractmethod
    def version(self, project, queue):
        """Return the queue's :class:`~.versions.Version`, or None.

        Two calls return equal versions only if no change was made to the
        queue's subscriptions in between; a version whose ``started`` is
        ahead of its ``landed`` has a change in flight. None means this
        deployment gives the store no place shared by all server processes.
        """

    @abc.abstractmethod
    def change_started(self, project, queue, refs=None):
        """Say that a change of the queue's subscriptions is being written.

        :param refs: the subscriptions it concerns, as a list of
            ``{"id": subscription_id}``; None when they are not known
            (every process then rebuilds the queue's matcher).
        :returns: the new ``started`` counter, for :meth:`changes_landed`;
            None when the store has no versions.
        """

    @abc.abstractmethod
    def changes(self, project, queue, since):
        """Return the changes after ``started`` was ``since``, or None.

        :returns: a :class:`~.versions.Changes`; None when the store has no
            versions or no longer logs every landed change since then.
        """

    @abc.abstractmethod
    def changes_landed(self, project, queue, started):
        """Say that the changes up to ``started`` are written."""

    @abc.abstractmethod
    def load(self, project, queue):
        """Return the queue's unexpired records, by subscription id."""

    @abc.abstractmethod
    def write(self, records):
        """Insert or replace records, skipping the unchanged ones.

        :returns: a :class:`WriteResult`.
        """

    @abc.abstractmethod
    def delete(self, project, queue, subscription_ids):
        """Delete the records of these subscriptions of a queue.

        :returns: how many were deleted.
        """

    @abc.abstractmethod
    def queues(self, project=None):
        """Yield (project, queue) for every queue that has records.

        :param project: only this project's queues when given.
        """

    def delivery_ledger(self):
        """Return the ledger of pending webhook deliveries, or None.

        A :class:`~zaqar_filtering.delivery.ledger.Ledger` kept beside this
        store; None when this deployment gives it no place shared by every
        server process.
        """
        return None

    def close(self):
        """Release connections."""
