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

"""A PySpark Python Data Source over a MongoDB collection, by ``_id`` ranges.

``spark.read.format('zaqar_mongodb')`` with the options:

``uri``
    the MongoDB URI (required);
``database``
    the database (default: the URI's, else ``zaqar_subscriptions``,
    where Zaqar's mongodb driver keeps subscriptions with its default
    ``[drivers:management_store:mongodb] database = zaqar``);
``collection``
    the collection (default ``subscriptions``);
``kind``
    ``subscriptions`` (Zaqar's documents ``{_id, s, u, t, e, o, p, c}``,
    the default) or ``policies`` (the policy store's documents);
``partitionSize``
    about how many documents one partition reads (default 100,000);
``minPartitions``
    the fewest partitions (default 1).

The driver only computes the partition boundaries: it counts the
documents and reads the ``_id`` of every ``partitionSize``-th document
(sorted by ``_id``, a covered index scan). Each task then opens its own
``pymongo.MongoClient`` and reads ``{_id: {$gte: low, $lt: high}}``, so no
document passes through the driver. Boundaries cover every ``_id`` of one
BSON type (Zaqar's are ObjectIds) exactly once.

Row values are plain strings: ``options`` and ``policy`` as JSON text,
``expires`` as ISO 8601 UTC (``None`` when absent), so that nothing
depends on the session time zone.
"""

import datetime
import json
import math

from pyspark.sql import datasource

NAME = 'zaqar_mongodb'
DEFAULT_DATABASE = 'zaqar_subscriptions'
DEFAULT_COLLECTION = 'subscriptions'
DEFAULT_PARTITION_SIZE = 100000

SUBSCRIPTIONS = 'subscriptions'
POLICIES = 'policies'

SCHEMAS = {
    SUBSCRIPTIONS: ('id string, queue string, subscriber string, '
                    'expires string, options string, project string'),
    POLICIES: ('project string, queue string, subscription_id string, '
               'subscriber string, hash string, expires string'),
}


def _iso(value):
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value.astimezone(datetime.timezone.utc).isoformat()


def subscription_row(doc):
    """Return the row of one Zaqar subscription document.

    A missing field is None, which the job reports as unreadable.
    """
    options = doc.get('o')
    return (str(doc['_id']), doc.get('s'), doc.get('u'), _iso(doc.get('e')),
            None if options is None else json.dumps(options, default=str),
            doc.get('p'))


def policy_row(doc):
    """Return the row of one policy store document."""
    return (doc.get('project'), doc.get('queue'), doc.get('subscription_id'),
            doc.get('subscriber'), doc.get('hash'), _iso(doc.get('expires')))


ROWS = {SUBSCRIPTIONS: subscription_row, POLICIES: policy_row}
PROJECTIONS = {
    SUBSCRIPTIONS: {'_id': 1, 's': 1, 'u': 1, 'e': 1, 'o': 1, 'p': 1},
    POLICIES: {'project': 1, 'queue': 1, 'subscription_id': 1,
               'subscriber': 1, 'hash': 1, 'expires': 1},
}


def default_client(uri):
    """Return a new pymongo client for ``uri`` (aware datetimes)."""
    import pymongo
    return pymongo.MongoClient(uri, tz_aware=True)


class IdRange(datasource.InputPartition):
    """Documents with ``low <= _id < high``; None is unbounded."""

    def __init__(self, low, high):
        super().__init__((low, high))
        self.low = low
        self.high = high

    def query(self):
        bounds = {}
        if self.low is not None:
            bounds['$gte'] = self.low
        if self.high is not None:
            bounds['$lt'] = self.high
        return {'_id': bounds} if bounds else {}


class MongoReader(datasource.DataSourceReader):
    """Reads one collection in ``_id`` ranges.

    :param client_factory: callable(uri) returning a pymongo-compatible
        client, called once in ``partitions()`` and once per ``read()``
        (tests pass one returning a mongomock client).
    """

    def __init__(self, options, client_factory=default_client):
        self.uri = options.get('uri')
        if not self.uri:
            raise ValueError('the %s data source needs the "uri" option'
                             % NAME)
        self.kind = options.get('kind', SUBSCRIPTIONS)
        if self.kind not in ROWS:
            raise ValueError('kind must be one of %s, not %r'
                             % (', '.join(sorted(ROWS)), self.kind))
        self.database = options.get('database') or _uri_database(
            self.uri) or DEFAULT_DATABASE
        self.collection = options.get('collection') or DEFAULT_COLLECTION
        self.partition_size = max(1, int(options.get(
            'partitionSize', DEFAULT_PARTITION_SIZE)))
        self.min_partitions = max(1, int(options.get('minPartitions', 1)))
        self.client_factory = client_factory

    def _collection(self, client):
        return client[self.database][self.collection]

    def partitions(self):
        client = self.client_factory(self.uri)
        try:
            coll = self._collection(client)
            count = coll.estimated_document_count()
            wanted = max(self.min_partitions,
                         math.ceil(count / self.partition_size))
            if count == 0 or wanted <= 1:
                return [IdRange(None, None)]
            step = max(1, count // wanted)
            bounds = []
            for index in range(1, wanted):
                doc = next(iter(coll.find({}, {'_id': 1}).sort('_id', 1)
                                .skip(index * step).limit(1)), None)
                if doc is None:
                    break
                if not bounds or doc['_id'] != bounds[-1]:
                    bounds.append(doc['_id'])
        finally:
            client.close()
        edges = [None] + bounds + [None]
        return [IdRange(low, high) for low, high in zip(edges, edges[1:])]

    def read(self, partition):
        row = ROWS[self.kind]
        client = self.client_factory(self.uri)
        try:
            cursor = self._collection(client).find(
                partition.query(), PROJECTIONS[self.kind])
            for doc in cursor:
                yield row(doc)
        finally:
            client.close()


class MongoDataSource(datasource.DataSource):
    """``spark.read.format('zaqar_mongodb')``; see the module docstring."""

    @classmethod
    def name(cls):
        return NAME

    def schema(self):
        kind = self.options.get('kind', SUBSCRIPTIONS)
        if kind not in SCHEMAS:
            raise ValueError('kind must be one of %s, not %r'
                             % (', '.join(sorted(SCHEMAS)), kind))
        return SCHEMAS[kind]

    #: callable(uri) returning a client; None for pymongo's.
    client_factory = None

    def reader(self, schema):
        return MongoReader(self.options,
                           self.client_factory or default_client)


def _uri_database(uri):
    from pymongo import uri_parser
    return uri_parser.parse_uri(uri, warn=True)['database']
