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

"""The ``subscriptions`` policy store (the default): nothing extra to run.

The policies are the options of Zaqar's own subscriptions, so there are no
records to keep. The per-queue versions and the webhook delivery ledger
live beside the subscriptions, in Zaqar's message store: redis keys, or
collections of the MongoDB subscriptions database. Other back ends (swift)
and pooled deployments give no such shared place: there a change made
through one server process reaches the others within ``[filtering]
matcher_cache_seconds``, and webhook retries are not durable; use the
``mongodb`` store to make both so.
"""

import threading

from oslo_log import log as logging

from zaqar_filtering.delivery.mongo_ledger import MongoLedger
from zaqar_filtering.delivery.redis_ledger import RedisLedger
from zaqar_filtering.store.base import PolicyStore
from zaqar_filtering.store.base import WriteResult
from zaqar_filtering.store import versions
from zaqar_filtering import zaqar_storage

LOG = logging.getLogger(__name__)

#: Collection of version documents in Zaqar's subscriptions database.
VERSIONS_COLLECTION = 'zaqar_filtering_versions'


class SubscriptionsStore(PolicyStore):
    """Policies read from Zaqar's subscriptions; versions in its store.

    :param conf: zaqar.conf's ``ConfigOpts``.
    :param data_driver: Zaqar's data driver; built from ``conf`` on first
        use when not given.
    """

    name = 'subscriptions'
    keeps_records = False

    def __init__(self, conf, data_driver=None):
        self._conf = conf
        self._driver = data_driver
        self._counter = None
        self._ledger = None
        self._lock = threading.Lock()

    def _versions(self):
        with self._lock:
            if self._counter is None:
                self._counter, self._ledger = _places_for(self._conf,
                                                          self._driver)
            return self._counter

    def delivery_ledger(self):
        self._versions()
        return self._ledger or None

    def version(self, project, queue):
        counter = self._versions()
        return counter.get(project, queue) if counter else None

    def change_started(self, project, queue, refs=None):
        counter = self._versions()
        return counter.start(project, queue, refs) if counter else None

    def changes(self, project, queue, since):
        counter = self._versions()
        return counter.changes(project, queue, since) if counter else None

    def changes_landed(self, project, queue, started):
        counter = self._versions()
        if counter:
            counter.land(project, queue, started)

    def load(self, project, queue):
        return {}

    def write(self, records):
        return WriteResult(unchanged=len(list(records)))

    def delete(self, project, queue, subscription_ids):
        return 0

    def queues(self, project=None):
        return iter(())


def _places_for(conf, driver):
    """Return the queue versions and the delivery ledger, or False, False."""
    if conf.pooling:
        LOG.warning('Pooling is enabled: the subscriptions policy store has '
                    'no place shared by every pool, so a change reaches '
                    'other server processes within [filtering] '
                    'matcher_cache_seconds. Use policy_store = mongodb to '
                    'make it immediate, and to keep webhook retries in a '
                    'durable delivery ledger.')
        return False, False
    backend = conf['drivers'].message_store
    if backend not in ('redis', 'mongodb'):
        LOG.warning('The %s message store gives the subscriptions policy '
                    'store no place for queue versions, so a change reaches '
                    'other server processes within [filtering] '
                    'matcher_cache_seconds. Use policy_store = mongodb to '
                    'make it immediate, and to keep webhook retries in a '
                    'durable delivery ledger.', backend)
        return False, False
    if driver is None:
        driver = zaqar_storage.data_driver(conf)
    if backend == 'redis':
        return (versions.RedisVersions(driver.connection),
                RedisLedger(driver.connection))
    database = driver.subscriptions_database
    return (versions.MongoVersions(database[VERSIONS_COLLECTION]),
            MongoLedger(database, 'delivery ledger (Zaqar\'s mongodb)'))
