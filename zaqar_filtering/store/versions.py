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

"""Per-queue versions and change logs, in redis or a MongoDB collection.

Zaqar runs the subscription stage before it writes a change, so a version
has two counters: ``started`` moves before the write, and ``landed``
catches up once the write is done. Each move of ``started`` also logs
which subscriptions it concerns (their ids), so that a server process
catches up with a change by reading those subscriptions again instead of
the whole queue: once for a change that landed, at every post for one in
flight. The log keeps the last :data:`LOG_LENGTH` moves; a process that
missed more rebuilds the queue's matcher.
"""

import collections
import json

from pymongo import errors as mongo_errors
from pymongo import ReturnDocument

from zaqar_filtering.store.base import StoreUnavailable

#: A queue's version; equal versions mean no change in between.
Version = collections.namedtuple('Version', 'started landed')

#: What :meth:`changes` returns: the queue's :class:`Version` and the
#: logged moves after the one asked for, oldest first, as ``(started,
#: refs)``; ``refs`` is a list of ``{"id": subscription_id}``, or None for
#: a change whose subscriptions are not known (rebuild the queue).
Changes = collections.namedtuple('Changes', 'version entries')

#: Moves each queue's change log keeps.
LOG_LENGTH = 1000

# Moves "started" and logs the move, in one step.
_START_SCRIPT = """
local started = redis.call('HINCRBY', KEYS[1], 's', 1)
redis.call('RPUSH', KEYS[2], '[' .. started .. ',' .. ARGV[1] .. ']')
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[2]), -1)
return started
"""

# The version and the moves after ARGV[1], in one step.
_CHANGES_SCRIPT = """
local v = redis.call('HMGET', KEYS[1], 's', 'l')
local missed = tonumber(v[1] or '0') - tonumber(ARGV[1])
local entries = {}
if missed > 0 then
  entries = redis.call('LRANGE', KEYS[2], -missed, -1)
end
return {v[1] or '0', v[2] or '0', entries}
"""

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
        self._start = client.register_script(_START_SCRIPT)
        self._changes = client.register_script(_CHANGES_SCRIPT)
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

    def start(self, project, queue, refs=None):
        """Move ``started`` and log ``refs``; return its new value."""
        key = self._key(project, queue)
        try:
            return self._start(keys=[key, key + '.log'],
                               args=[json.dumps(refs), LOG_LENGTH])
        except self._errors as exc:
            raise StoreUnavailable('subscriptions (redis)', exc) from exc

    def changes(self, project, queue, since):
        """Return the :class:`Changes` after the move ``since``, or None.

        None when the log no longer holds every move from ``since`` to
        ``landed``.
        """
        key = self._key(project, queue)
        try:
            started, landed, entries = self._changes(
                keys=[key, key + '.log'], args=[since])
        except self._errors as exc:
            raise StoreUnavailable('subscriptions (redis)', exc) from exc
        return _changes(Version(int(started), int(landed)),
                        [tuple(json.loads(e)) for e in entries], since)

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

    def _document(self, project, queue):
        try:
            doc = self._collection.find_one({'_id': {'p': project,
                                                     'q': queue}})
        except mongo_errors.PyMongoError as exc:
            raise StoreUnavailable(self._store, exc) from exc
        doc = doc or {}
        return doc, Version(doc.get('s', 0), doc.get('l', 0))

    def get(self, project, queue):
        """Return the queue's :class:`Version`."""
        return self._document(project, queue)[1]

    def start(self, project, queue, refs=None):
        """Move ``started`` and log ``refs``; return its new value."""
        key = {'_id': {'p': project, 'q': queue}}
        try:
            started = self._collection.find_one_and_update(
                key, {'$inc': {'s': 1}}, upsert=True,
                return_document=ReturnDocument.AFTER)['s']
            # A reader in between sees the move in flight without its
            # entry, and reads the log again at its next post.
            self._collection.update_one(key, {'$push': {'log': {
                '$each': [{'n': started, 'r': refs}], '$sort': {'n': 1},
                '$slice': -LOG_LENGTH}}})
        except mongo_errors.PyMongoError as exc:
            raise StoreUnavailable(self._store, exc) from exc
        return started

    def changes(self, project, queue, since):
        """Return the :class:`Changes` after the move ``since``, or None.

        None when the log no longer holds every move from ``since`` to
        ``landed``.
        """
        doc, version = self._document(project, queue)
        return _changes(version, [(e['n'], e['r']) for e in doc.get('log', ())
                                  if e['n'] > since], since)

    def land(self, project, queue, started):
        """Move ``landed`` up to ``started`` (never back)."""
        try:
            self._collection.update_one({'_id': {'p': project, 'q': queue}},
                                        {'$max': {'l': started}}, upsert=True)
        except mongo_errors.PyMongoError as exc:
            raise StoreUnavailable(self._store, exc) from exc


def _changes(version, entries, since):
    """Return :class:`Changes`, or None if a landed move is missing."""
    entries = [(started, refs) for started, refs in entries
               if started > since]
    logged = {started for started, _ in entries}
    if any(n not in logged for n in range(since + 1, version.landed + 1)):
        return None
    return Changes(version, entries)
