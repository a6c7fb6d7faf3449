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

"""Per-queue version counters, in redis or in a MongoDB collection.

A version only has to change when the queue's subscriptions change: every
server process compares it before a post and rebuilds its matcher when it
moved.
"""

from pymongo import errors as mongo_errors

from zaqar_filtering.store.base import StoreUnavailable


class RedisVersions:
    """A version per queue: one redis key, moved with INCR.

    :param client: a ``redis.Redis`` client (Zaqar's own).
    """

    def __init__(self, client):
        # redis-py comes with Zaqar's redis store, not with this package.
        import redis
        self._client = client
        self._errors = (redis.exceptions.ConnectionError,
                        redis.exceptions.TimeoutError)

    @staticmethod
    def _key(project, queue):
        return 'zaqar_filtering.version.%s.%s' % (project or '', queue)

    def get(self, project, queue):
        """Return the queue's version, 0 before its first change."""
        try:
            value = self._client.get(self._key(project, queue))
        except self._errors as exc:
            raise StoreUnavailable('subscriptions (redis)', exc) from exc
        return int(value or 0)

    def bump(self, project, queue):
        """Move the queue's version."""
        try:
            self._client.incr(self._key(project, queue))
        except self._errors as exc:
            raise StoreUnavailable('subscriptions (redis)', exc) from exc


class MongoVersions:
    """A version per queue: one document ``{_id: {p, q}, v}``, moved with $inc.

    :param collection: a pymongo collection.
    :param store: the store's name, for error messages.
    """

    def __init__(self, collection, store='subscriptions (mongodb)'):
        self._collection = collection
        self._store = store

    def get(self, project, queue):
        """Return the queue's version, 0 before its first change."""
        try:
            doc = self._collection.find_one({'_id': {'p': project,
                                                     'q': queue}})
        except mongo_errors.PyMongoError as exc:
            raise StoreUnavailable(self._store, exc) from exc
        return doc['v'] if doc else 0

    def bump(self, project, queue):
        """Move the queue's version."""
        try:
            self._collection.update_one({'_id': {'p': project, 'q': queue}},
                                        {'$inc': {'v': 1}}, upsert=True)
        except mongo_errors.PyMongoError as exc:
            raise StoreUnavailable(self._store, exc) from exc
