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

"""Make a store's records of a queue equal to its Zaqar subscriptions."""

import dataclasses
import datetime

from zaqar_filtering import InvalidPolicy
from zaqar_filtering.store.record import record_from_listing


@dataclasses.dataclass
class SyncResult:
    """What syncing one queue found and did."""
    written: int = 0
    unchanged: int = 0
    deleted: int = 0
    #: subscription id -> the InvalidPolicy that kept it out of the store.
    invalid: dict = dataclasses.field(default_factory=dict)


def sync_queue(store, project, queue, subscriptions, limits, now=None):
    """Write a queue's subscriptions to the store; delete orphan records.

    :param subscriptions: the queue's subscriptions as Zaqar lists them.
    :returns: a :class:`SyncResult`.
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    result = SyncResult()
    records = []
    for subscription in subscriptions:
        try:
            records.append(record_from_listing(project, queue, subscription,
                                               now, limits))
        except InvalidPolicy as exc:
            result.invalid[str(subscription['id'])] = exc
    if not store.keeps_records:
        result.unchanged = len(records)
        return result
    kept = {record.subscription_id for record in records}
    orphans = [sub_id for sub_id in store.load(project, queue)
               if sub_id not in kept]
    written = store.write(records)
    result.written = written.written
    result.unchanged = written.unchanged
    if orphans:
        result.deleted = store.delete(project, queue, orphans)
    return result
