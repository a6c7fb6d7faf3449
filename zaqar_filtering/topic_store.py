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

"""Where topics live: their names and metadata, per project.

A topic keeps no messages, so it needs no message store of its own: only
its name, its metadata (``_retry_policy``, ``_default_message_ttl``,
``_max_messages_post_size``) and its subscriptions. Zaqar 23 has a topic
controller for MongoDB only, and one that stores messages; the registry
here keeps the same few things in Zaqar's message store, whatever it is
(redis: one hash per project; MongoDB: a collection of the subscriptions
database), beside the subscriptions and the delivery ledger.

A topic's subscriptions are Zaqar's own subscriptions, whose ``source`` is
``topic:NAME`` (:func:`source_of`). No queue name contains a colon, so a
topic and a queue of the same name never share a subscription, a matcher,
a policy version or a ledger entry, and a ``/v2/queues/...`` URI reaches
no topic subscription.
"""

import abc
import json
import threading

from pymongo import errors as mongo_errors
from zaqar.storage import errors as storage_errors

from zaqar_filtering.store.base import StoreUnavailable
from zaqar_filtering import zaqar_storage

#: The ``source`` prefix of a topic's subscriptions.
SOURCE_PREFIX = 'topic:'
#: The redis key prefix (one hash per project) and the MongoDB collection.
REDIS_PREFIX = 'zaqar_filtering.topics.'
COLLECTION = 'zaqar_filtering_topics'
STORE = 'topic registry'


def source_of(topic):
    """Return the subscription ``source`` of a topic's subscriptions."""
    return SOURCE_PREFIX + topic


def topic_of(source):
    """Return the topic of a subscription ``source``, or None (a queue)."""
    if source.startswith(SOURCE_PREFIX):
        return source[len(SOURCE_PREFIX):]
    return None


class TopicsUnavailable(Exception):
    """This deployment has no place for topics."""


class Topics(abc.ABC):
    """The topics of every project.

    Methods raise :class:`StoreUnavailable` when the back end does not
    answer, and ``zaqar.storage.errors.TopicDoesNotExist`` for a topic
    that does not exist.
    """

    @abc.abstractmethod
    def put(self, project, name, metadata):
        """Create a topic or replace its metadata; return if it is new."""

    @abc.abstractmethod
    def ensure(self, project, name):
        """Create a topic without metadata unless it exists."""

    @abc.abstractmethod
    def get(self, project, name):
        """Return a topic's metadata."""

    @abc.abstractmethod
    def names(self, project, marker=None, limit=10):
        """Return up to ``limit`` topic names after ``marker``, sorted."""

    @abc.abstractmethod
    def delete(self, project, name):
        """Forget a topic (nothing happens if it does not exist)."""

    @abc.abstractmethod
    def projects(self):
        """Return the projects that have topics (None: no project)."""

    def all_names(self, project, page_size=1000):
        """Yield every topic name of a project, sorted."""
        marker = None
        while True:
            names = self.names(project, marker, page_size)
            yield from names
            if len(names) < page_size:
                return
            marker = names[-1]

    def exists(self, project, name):
        """Return whether the topic exists."""
        try:
            self.get(project, name)
        except storage_errors.TopicDoesNotExist:
            return False
        return True


class RedisTopics(Topics):
    """Topics in redis: a hash per project, topic name -> metadata JSON."""

    def __init__(self, client):
        # redis-py comes with Zaqar's redis store, not with this package.
        import redis
        self._client = client
        self._errors = (redis.exceptions.ConnectionError,
                        redis.exceptions.TimeoutError)

    def _key(self, project):
        return REDIS_PREFIX + (project or '')

    def _call(self, method, *args):
        try:
            return getattr(self._client, method)(*args)
        except self._errors as exc:
            raise StoreUnavailable(STORE, exc)

    def put(self, project, name, metadata):
        return bool(self._call('hset', self._key(project), name,
                               json.dumps(metadata or {})))

    def ensure(self, project, name):
        self._call('hsetnx', self._key(project), name, '{}')

    def get(self, project, name):
        found = self._call('hget', self._key(project), name)
        if found is None:
            raise storage_errors.TopicDoesNotExist(name, project)
        return json.loads(found)

    def names(self, project, marker=None, limit=10):
        names = sorted(_text(n)
                       for n in self._call('hkeys', self._key(project)))
        return [n for n in names if marker is None or n > marker][:limit]

    def delete(self, project, name):
        self._call('hdel', self._key(project), name)

    def projects(self):
        try:
            keys = list(self._client.scan_iter(match=REDIS_PREFIX + '*'))
        except self._errors as exc:
            raise StoreUnavailable(STORE, exc)
        return sorted({_text(key)[len(REDIS_PREFIX):] or None
                       for key in keys}, key=lambda p: p or '')


class MongoTopics(Topics):
    """Topics in a MongoDB collection: ``{_id, p: project, n: name, m}``."""

    def __init__(self, collection):
        self._collection = collection
        self._indexed = False

    def _id(self, project, name):
        # Project ids contain no slash in Zaqar's MongoDB keys either.
        return '%s/%s' % (project or '', name)

    def _run(self, function, *args, **kwargs):
        try:
            if not self._indexed:
                self._collection.create_index([('p', 1), ('n', 1)])
                self._indexed = True
            return function(*args, **kwargs)
        except mongo_errors.PyMongoError as exc:
            raise StoreUnavailable(STORE, exc)

    def put(self, project, name, metadata):
        result = self._run(self._collection.replace_one,
                           {'_id': self._id(project, name)},
                           {'p': project or '', 'n': name,
                            'm': metadata or {}}, upsert=True)
        return result.upserted_id is not None

    def ensure(self, project, name):
        self._run(self._collection.update_one,
                  {'_id': self._id(project, name)},
                  {'$setOnInsert': {'p': project or '', 'n': name, 'm': {}}},
                  upsert=True)

    def get(self, project, name):
        found = self._run(self._collection.find_one,
                          {'_id': self._id(project, name)})
        if found is None:
            raise storage_errors.TopicDoesNotExist(name, project)
        return found['m']

    def names(self, project, marker=None, limit=10):
        query = {'p': project or ''}
        if marker is not None:
            query['n'] = {'$gt': marker}
        return self._run(lambda: [
            doc['n'] for doc in self._collection.find(query, {'n': 1})
            .sort('n', 1).limit(limit)])

    def delete(self, project, name):
        self._run(self._collection.delete_one,
                  {'_id': self._id(project, name)})

    def projects(self):
        found = self._run(self._collection.distinct, 'p')
        return sorted({project or None for project in found},
                      key=lambda p: p or '')


class LazyTopics(Topics):
    """The topics of zaqar.conf's message store, reached on first use.

    :raises TopicsUnavailable: (from every method) when the deployment is
        pooled or its message store is neither redis nor MongoDB.
    """

    def __init__(self, conf, data_driver=None):
        self._conf = conf
        self._driver = data_driver
        self._topics = None
        self._lock = threading.Lock()

    def _place(self):
        with self._lock:
            if self._topics is None:
                self._topics = _topics_for(self._conf, self._driver)
            return self._topics

    def put(self, project, name, metadata):
        return self._place().put(project, name, metadata)

    def ensure(self, project, name):
        self._place().ensure(project, name)

    def get(self, project, name):
        return self._place().get(project, name)

    def names(self, project, marker=None, limit=10):
        return self._place().names(project, marker, limit)

    def delete(self, project, name):
        self._place().delete(project, name)

    def projects(self):
        return self._place().projects()


def available(conf, data_driver):
    """Return the topic registry of a deployment, or None if it has none.

    For the tools that list every subscription: a deployment whose message
    store cannot keep topics (pooled, or neither redis nor MongoDB) has no
    topic subscriptions either.
    """
    topics = LazyTopics(conf, data_driver)
    try:
        topics.projects()
    except TopicsUnavailable:
        return None
    return topics


def _text(value):
    return value.decode('utf-8') if isinstance(value, bytes) else value


def _topics_for(conf, driver):
    if conf.pooling:
        raise TopicsUnavailable('Topics are not available with pooling: '
                                'no store is shared by every pool.')
    backend = conf['drivers'].message_store
    if backend not in ('redis', 'mongodb'):
        raise TopicsUnavailable('Topics need the redis or mongodb message '
                                'store, not %s.' % backend)
    if driver is None:
        driver = zaqar_storage.data_driver(conf)
    if backend == 'redis':
        return RedisTopics(driver.connection)
    return MongoTopics(driver.subscriptions_database[COLLECTION])
