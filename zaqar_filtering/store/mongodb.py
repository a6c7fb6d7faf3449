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

"""The ``mongodb`` policy store: one document per subscription, in MongoDB.

Policy documents (collection ``[filtering:mongodb] collection``)::

    {project, queue, subscription_id,     # unique together
     subscriber, policy, kinds, hash, expires, updated_at}

Version documents (collection ``[filtering:mongodb] versions_collection``)::

    {_id: {p: project, q: queue}, s: started, l: landed,
     log: [{n: started, r: [{id: subscription_id}, ...]}, ...]}

Expired documents are left out of reads at once and removed by MongoDB's
TTL monitor (about a minute later).
"""

import datetime
import functools

from oslo_config import cfg
from oslo_log import log as logging
import pymongo
from pymongo import errors as mongo_errors
from pymongo import uri_parser

from zaqar_filtering.delivery.mongo_ledger import MongoLedger
from zaqar_filtering import opts
from zaqar_filtering.store.base import PolicyStore
from zaqar_filtering.store.base import StoreUnavailable
from zaqar_filtering.store.base import WriteResult
from zaqar_filtering.store.record import PolicyRecord
from zaqar_filtering.store import versions

LOG = logging.getLogger(__name__)

#: The key; its prefix (project, queue) also serves reading one queue.
KEY_INDEX = [('project', pymongo.ASCENDING), ('queue', pymongo.ASCENDING),
             ('subscription_id', pymongo.ASCENDING)]
KEY_INDEX_NAME = 'project_queue_subscription'
EXPIRES_INDEX_NAME = 'expires_ttl'


def _unavailable(method):
    """Raise StoreUnavailable for what pymongo raises."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except mongo_errors.PyMongoError as exc:
            raise StoreUnavailable(self.name, exc) from exc
    return wrapper


class MongoStore(PolicyStore):
    """Policy records and queue versions in MongoDB.

    :param conf: an oslo.config ``ConfigOpts``; ``[filtering:mongodb]``
        gives the URI, database, collections and timeouts.
    :param client: a ``pymongo.MongoClient``-compatible client to use
        instead of connecting to the URI (tests pass mongomock's).
    """

    name = 'mongodb'

    def __init__(self, conf, client=None):
        opts.register_opts(conf)
        group = conf[opts.MONGODB_GROUP_NAME]
        if client is None:
            if not group.uri:
                raise ValueError('[%s] uri must be set when [%s] '
                                 'policy_store is mongodb'
                                 % (opts.MONGODB_GROUP_NAME, opts.GROUP_NAME))
            client = pymongo.MongoClient(
                group.uri, tz_aware=True, connect=False,
                connectTimeoutMS=int(group.connect_timeout_seconds * 1000),
                serverSelectionTimeoutMS=int(
                    group.server_selection_timeout_seconds * 1000),
                socketTimeoutMS=int(group.socket_timeout_seconds * 1000))
        self._client = client
        database = client[group.database]
        self._policies = database[group.collection]
        self._versions = versions.MongoVersions(
            database[group.versions_collection], self.name)
        self._ledger = MongoLedger(database, 'delivery ledger (mongodb)')
        self._indexed = False

    @classmethod
    def for_uri(cls, uri, client=None, **options):
        """Return a store for a MongoDB URI, outside zaqar.conf.

        The URI's database (``mongodb://host/DATABASE``), when it names
        one, is the store's database unless ``database`` is given.

        :param options: other ``[filtering:mongodb]`` options by name.
        :raises ValueError: when the URI is not a MongoDB URI.
        """
        conf = cfg.ConfigOpts()
        opts.register_opts(conf)
        conf([], project='zaqar-filtering', default_config_files=[],
             default_config_dirs=[])
        conf.set_override('uri', uri, opts.MONGODB_GROUP_NAME)
        if 'database' not in options:
            database = uri_database(uri)
            if database:
                options = dict(options, database=database)
        for name, value in options.items():
            conf.set_override(name, value, opts.MONGODB_GROUP_NAME)
        return cls(conf, client)

    def _ensure_indexes(self):
        if self._indexed:
            return
        self._policies.create_index(KEY_INDEX, name=KEY_INDEX_NAME,
                                    unique=True)
        self._policies.create_index('expires', name=EXPIRES_INDEX_NAME,
                                    expireAfterSeconds=0)
        self._indexed = True

    def delivery_ledger(self):
        return self._ledger

    def version(self, project, queue):
        return self._versions.get(project, queue)

    def change_started(self, project, queue, refs=None):
        return self._versions.start(project, queue, refs)

    def changes(self, project, queue, since):
        return self._versions.changes(project, queue, since)

    def changes_landed(self, project, queue, started):
        self._versions.land(project, queue, started)

    @_unavailable
    def load(self, project, queue):
        self._ensure_indexes()
        now = _now()
        found = {}
        for doc in self._policies.find({'project': project, 'queue': queue}):
            record = _record(doc)
            if record.expires is None or record.expires > now:
                found[record.subscription_id] = record
        return found

    @_unavailable
    def write(self, records):
        self._ensure_indexes()
        records = {record.key: record for record in records}
        if not records:
            return WriteResult()
        by_queue = {}
        for project, queue, sub_id in records:
            by_queue.setdefault((project, queue), []).append(sub_id)
        existing = {}
        query = {'$or': [{'project': project, 'queue': queue,
                          'subscription_id': {'$in': ids}}
                         for (project, queue), ids in by_queue.items()]}
        for doc in self._policies.find(query):
            record = _record(doc)
            existing[record.key] = record
        now = _now()
        requests = []
        for key, record in records.items():
            old = existing.get(key)
            if old is not None and old.same_as(record):
                continue
            requests.append(pymongo.ReplaceOne(
                {'project': record.project, 'queue': record.queue,
                 'subscription_id': record.subscription_id},
                _document(record, now), upsert=True))
        if requests:
            try:
                self._policies.bulk_write(requests, ordered=False)
            except mongo_errors.BulkWriteError as exc:
                # Two writers inserting the same new key: the loser's
                # upsert fails on the unique index, and replaces when run
                # again.
                if any(error.get('code') != 11000
                       for error in exc.details.get('writeErrors', ())):
                    raise
                self._policies.bulk_write(requests, ordered=False)
        return WriteResult(written=len(requests),
                           unchanged=len(records) - len(requests))

    @_unavailable
    def delete(self, project, queue, subscription_ids):
        result = self._policies.delete_many(
            {'project': project, 'queue': queue,
             'subscription_id': {'$in': [str(i) for i in subscription_ids]}})
        return result.deleted_count

    @_unavailable
    def queues(self, project=None):
        match = {} if project is None else {'project': project}
        pipeline = [{'$match': match},
                    {'$group': {'_id': {'p': '$project', 'q': '$queue'}}}]
        pairs = sorted(((doc['_id'].get('p'), doc['_id']['q'])
                        for doc in self._policies.aggregate(pipeline)),
                       key=lambda pair: (pair[0] or '', pair[1]))
        return iter(pairs)

    def close(self):
        self._client.close()


def uri_database(uri):
    """Return the database a MongoDB URI names, or None.

    :raises ValueError: when ``uri`` is not a MongoDB URI.
    """
    try:
        return uri_parser.parse_uri(uri, warn=True)['database']
    except mongo_errors.InvalidURI as exc:
        raise ValueError('%s is not a MongoDB URI: %s' % (uri, exc))


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def _document(record, now):
    return {'project': record.project, 'queue': record.queue,
            'subscription_id': record.subscription_id,
            'subscriber': record.subscriber, 'policy': record.policy,
            'kinds': list(record.kinds), 'hash': record.hash,
            'expires': record.expires, 'updated_at': now}


def _aware(value):
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value


def _record(doc):
    return PolicyRecord(doc['project'], doc['queue'], doc['subscription_id'],
                        doc['subscriber'], doc['policy'], tuple(doc['kinds']),
                        _aware(doc.get('expires')), doc['hash'])
