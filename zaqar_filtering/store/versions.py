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

"""Per-queue versions, in redis or in a MongoDB collection.

Zaqar runs the subscription stage before it writes a change, so a version
has two counters: ``started`` moves before the write, and ``landed``
catches up once the write is done. A server process caches a queue's
matcher only while the two are equal, and rebuilds it when they move.
"""

import collections

from pymongo import errors as mongo_errors
from pymongo import ReturnDocument

from zaqar_filtering.store.base import StoreUnavailable

#: A queue's version; equal versions mean no change in between.
Version = collections.namedtuple('Version', 'started landed')

# Sets landed to max(landed, ARGV[1]) in one step.
_LAND_SCRIPT = """
local landed = tonumber(redis.call('HGET', KEYS[1], 'l') or '0')
if tonumber(ARGV[1]) > landed then
  redis.call('HSET', KEYS[1], 'l', ARGV[1])
end
"""


class RedisVersions:
    """Versions as redis hashes ``{s: started, l: landed}``, one per queue.

    :param client: a ``redis.Redis`` client (Zaqar's own).
    """

    def __init__(self, client):
        # redis-py comes with Zaqar's redis store, not with this package.
        import redis
        self._client = client
        self._land = client.register_script(_LAND_SCRIPT)
        self._errors = (redis.exceptions.ConnectionError,
                        redis.exceptions.TimeoutError)

    @staticmethod
    def _key(project, queue):
        return 'zaqar_filtering.version.%s.%s' % (project or '', queue)

    def get(self, project, queue):
        """Return the queue's :class:`Version`."""
        try:
            started, landed = self._client.hmget(self._key(project, queue),
                                                 ['s', 'l'])
        except self._errors as exc:
            raise StoreUnavailable('subscriptions (redis)', exc) from exc
        return Version(int(started or 0), int(landed or 0))

    def start(self, project, queue):
        """Move ``started``; return its new value."""
        try:
            return self._client.hincrby(self._key(project, queue), 's', 1)
        except self._errors as exc:
            raise StoreUnavailable('subscriptions (redis)', exc) from exc

    def land(self, project, queue, started):
        """Move ``landed`` up to ``started`` (never back)."""
        try:
            self._land(keys=[self._key(project, queue)], args=[started])
        except self._errors as exc:
            raise StoreUnavailable('subscriptions (redis)', exc) from exc


class MongoVersions:
    """Versions as documents ``{_id: {p, q}, s: started, l: landed}``.

    :param collection: a pymongo collection.
    :param store: the store's name, for error messages.
    """

    def __init__(self, collection, store='subscriptions (mongodb)'):
        self._collection = collection
        self._store = store

    def get(self, project, queue):
        """Return the queue's :class:`Version`."""
        try:
            doc = self._collection.find_one({'_id': {'p': project,
                                                     'q': queue}})
        except mongo_errors.PyMongoError as exc:
            raise StoreUnavailable(self._store, exc) from exc
        doc = doc or {}
        return Version(doc.get('s', 0), doc.get('l', 0))

    def start(self, project, queue):
        """Move ``started``; return its new value."""
        try:
            doc = self._collection.find_one_and_update(
                {'_id': {'p': project, 'q': queue}}, {'$inc': {'s': 1}},
                upsert=True, return_document=ReturnDocument.AFTER)
        except mongo_errors.PyMongoError as exc:
            raise StoreUnavailable(self._store, exc) from exc
        return doc['s']

    def land(self, project, queue, started):
        """Move ``landed`` up to ``started`` (never back)."""
        try:
            self._collection.update_one({'_id': {'p': project, 'q': queue}},
                                        {'$max': {'l': started}}, upsert=True)
        except mongo_errors.PyMongoError as exc:
            raise StoreUnavailable(self._store, exc) from exc
