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

"""Test doubles of MongoDB that Spark's Python workers share, via files.

The Spark tests run without MongoDB: every task of the job opens its own
client, in a worker process of its own, so the data must live outside
the processes.

* :class:`FileTarget`: a policy store in one JSON file,
  ``{"project|queue|id": [hash, subscriber, expires]}``, written under an
  exclusive lock, skipping unchanged records the way ``MongoStore.write``
  does (same hash and subscriber, expiry within a second).
* :func:`mongomock_source`: the job's MongoDB data source whose every
  client is a mongomock client loaded from a file of Zaqar documents.

Pickled by value, so workers need not import tests.
"""

import fcntl
import json
import os
import sys

from bson import json_util
import mongomock
from pyspark import cloudpickle

from zaqar_filtering.store.base import WriteResult
from zaqar_filtering_backfill import mongo_source


def _key(key):
    return '|'.join('' if part is None else part for part in key)


class FileStore:

    def __init__(self, path):
        self.path = path

    def write(self, records):
        from zaqar_filtering_backfill import transform
        with open(self.path + '.lock', 'w') as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            stored = self.read()
            written = 0
            for record in records:
                wanted = list(transform.fingerprint(record))
                old = stored.get(_key(record.key))
                if old is None or transform.drift(wanted, old) is not None:
                    stored[_key(record.key)] = wanted
                    written += 1
            with open(self.path + '.tmp', 'w') as out:
                json.dump(stored, out)
            os.replace(self.path + '.tmp', self.path)
        return WriteResult(written=written,
                           unchanged=len(records) - written)

    def read(self):
        if not os.path.exists(self.path):
            return {}
        with open(self.path) as f:
            return json.load(f)

    def close(self):
        pass


class FileTarget:
    """A backfill job target (``open()``, ``records()``) over a file."""

    def __init__(self, path):
        self.path = path

    def open(self):
        return FileStore(self.path)

    def stored(self):
        return FileStore(self.path).read()

    def save(self, stored):
        with open(self.path, 'w') as out:
            json.dump(stored, out)

    def records(self, spark, min_partitions):
        rows = [tuple(key.split('|')) + (value[1], value[0], value[2])
                for key, value in sorted(self.stored().items())]
        return spark.sparkContext.parallelize(rows, min_partitions)


def mongomock_source(path, database, name='zaqar_mongodb_test'):
    """Return a MongoDataSource subclass reading documents from ``path``.

    Each client (one per ``partitions()`` and per ``read()``) is a fresh
    mongomock client holding the documents of the JSON file ``path``
    (MongoDB extended JSON) in ``database``.subscriptions.
    """
    def client(uri):
        mock = mongomock.MongoClient(tz_aware=True)
        with open(path) as f:
            docs = json_util.loads(f.read())
        if docs:
            mock[database].subscriptions.insert_many(docs)
        return mock

    return type('MongomockSource', (mongo_source.MongoDataSource,), {
        'name': classmethod(lambda cls: name),
        'client_factory': staticmethod(client)})


def save_documents(path, docs):
    with open(path, 'w') as out:
        out.write(json_util.dumps(docs))


cloudpickle.register_pickle_by_value(sys.modules[__name__])
