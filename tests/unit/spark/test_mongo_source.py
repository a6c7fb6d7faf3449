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

"""The MongoDB data source and the per-partition step, on mongomock.

No Spark session: the reader's ``partitions()`` and ``read()`` and the
job's ``classify_partition`` are called directly, as an executor would.
"""

import datetime
import os
import sys
import unittest

import bson
import mongomock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', '..',
                                'spark'))
from tests.unit.store import fixtures  # noqa: E402
from zaqar_filtering_backfill import job  # noqa: E402
from zaqar_filtering_backfill import mongo_source  # noqa: E402
from zaqar_filtering_backfill import transform  # noqa: E402

UTC = datetime.timezone.utc
NOW = datetime.datetime.now(UTC).replace(microsecond=0)


def zaqar_doc(index, options, hours=1, project='p1'):
    """A subscription document as Zaqar's mongodb driver stores it."""
    return {'_id': bson.ObjectId(), 's': 'q%d' % (index % 3),
            'u': 'http://x/%d' % index, 't': 3600,
            'e': (NOW + datetime.timedelta(hours=hours)).replace(tzinfo=None),
            'o': options, 'p': project, 'c': True}


def documents(count):
    docs = []
    for index in range(count):
        if index % 4 == 0:
            options = {'filter_policies': ['t%d' % index]}
        elif index % 4 == 1:
            options = {'binding_keys': ['a..b']}
        elif index % 4 == 2:
            options = {}
        else:
            options = {'binding_keys': ['order.#']}
        docs.append(zaqar_doc(index, options,
                              hours=-1 if index == 7 else 1))
    return docs


class Target:
    """A job target whose store is one MongoStore over mongomock."""

    def __init__(self):
        self.store = fixtures.mongomock_store()
        self.store.close = lambda: None

    def open(self):
        return self.store


class MongoSourceTest(unittest.TestCase):

    def setUp(self):
        self.client = mongomock.MongoClient(tz_aware=True)
        self.client.close = lambda: None
        self.coll = self.client.zaqar_subscriptions.subscriptions
        self.docs = documents(23)
        self.coll.insert_many(self.docs)

    def reader(self, **options):
        options.setdefault('uri', 'mongodb://zaqar.invalid')
        return mongo_source.MongoReader(
            options, client_factory=lambda uri: self.client)

    def read_all(self, reader):
        rows = []
        for partition in reader.partitions():
            rows.extend(reader.read(partition))
        return rows

    def test_partitions_cover_every_document_once(self):
        reader = self.reader(partitionSize='5')
        partitions = reader.partitions()
        self.assertEqual(5, len(partitions))
        rows = self.read_all(reader)
        self.assertEqual(sorted(str(doc['_id']) for doc in self.docs),
                         sorted(row[0] for row in rows))

    def test_min_partitions_and_one_partition(self):
        self.assertEqual(8, len(self.reader(minPartitions='8').partitions()))
        self.assertEqual(1, len(self.reader().partitions()))
        self.assertEqual(23, len(self.read_all(self.reader())))

    def test_empty_collection_is_one_empty_partition(self):
        self.coll.delete_many({})
        reader = self.reader(minPartitions='4')
        self.assertEqual([], self.read_all(reader))

    def test_database_from_the_uri_or_the_default(self):
        self.assertEqual('zaqar_subscriptions', self.reader().database)
        self.assertEqual(
            'other', self.reader(uri='mongodb://h/other').database)
        self.assertRaisesRegex(ValueError, '"uri" option',
                               mongo_source.MongoReader, {})

    def test_rows_become_subscriptions(self):
        doc = self.docs[0]
        [row] = [row for row in self.read_all(self.reader())
                 if row[0] == str(doc['_id'])]
        sub = transform.from_mongo_row(row)
        self.assertEqual(str(doc['_id']), sub['id'])
        self.assertEqual('q0', sub['queue'])
        self.assertEqual({'filter_policies': ['t0']}, sub['options'])
        self.assertEqual(doc['e'].replace(tzinfo=UTC), sub['expires'])

    def test_a_document_without_queue_is_unreadable(self):
        self.coll.insert_one({'_id': bson.ObjectId(), 'u': 'http://x'})
        outcomes = list(job.classify_partition(
            self.read_all(self.reader()), job._parse_row, NOW))
        unreadable = [row for row in outcomes
                      if row[0] == transform.UNREADABLE]
        self.assertEqual(1, len(unreadable))
        self.assertIn("no 's' field", unreadable[0][3][4])

    def test_policies_kind_reads_the_store(self):
        target = Target()
        list(job.classify_partition(self.read_all(self.reader()),
                                    job._parse_row, NOW, target))
        policies = target.store._policies
        reader = mongo_source.MongoReader(
            {'uri': 'mongodb://h', 'kind': 'policies',
             'database': policies.database.name,
             'collection': policies.name, 'partitionSize': '2'},
            client_factory=lambda uri: target.store._client)
        rows = self.read_all(reader)
        self.assertEqual(10, len(rows))    # the valid, unexpired ones
        self.assertEqual({'p1'}, {row[0] for row in rows})


class ClassifyPartitionTest(unittest.TestCase):
    """The write path: one partition's valid policies through MongoStore."""

    def setUp(self):
        self.rows = [mongo_source.subscription_row(doc)
                     for doc in documents(40)]

    def run_partition(self, target, **kwargs):
        outcomes = list(job.classify_partition(self.rows, job._parse_row,
                                               NOW, target, **kwargs))
        kind, _, _, counts = outcomes.pop()
        self.assertEqual(job.STORE_COUNTS, kind)
        return outcomes, counts

    def test_valid_policies_are_written_then_unchanged(self):
        target = Target()
        outcomes, counts = self.run_partition(target, batch_size=7)
        by_kind = transform.summary_from_counts(
            (row[:3], 1) for row in outcomes)
        self.assertEqual({'total': 40, 'valid': 19, 'invalid': 10,
                          'no_policy': 10, 'expired': 1},
                         {name: by_kind[name] for name in
                          ('total', 'valid', 'invalid', 'no_policy',
                           'expired')})
        self.assertEqual((19, 0), counts)
        self.assertEqual(19, target.store._policies.count_documents({}))
        _, counts = self.run_partition(target)
        self.assertEqual((0, 19), counts)

    def test_a_changed_policy_is_written_again(self):
        target = Target()
        self.run_partition(target)
        row = list(self.rows[0])
        row[4] = '{"filter_policies": ["changed"]}'
        self.rows[0] = tuple(row)
        _, counts = self.run_partition(target)
        self.assertEqual((1, 18), counts)
        [doc] = target.store._policies.find({'subscription_id': row[0]})
        self.assertEqual({'filter_policies': ['changed']}, doc['policy'])

    def test_dry_run_writes_nothing(self):
        outcomes, counts = self.run_partition(None)
        self.assertEqual((0, 0), counts)
        self.assertEqual(40, len(outcomes))

    def test_invalid_rows_carry_the_report_line(self):
        outcomes, _ = self.run_partition(None)
        invalid = [row for row in outcomes if row[0] == transform.INVALID]
        self.assertEqual('binding_key_empty_word', invalid[0][2])
        project, queue, sub_id, option, reason = invalid[0][3]
        self.assertEqual(('p1', 'q1', 'binding_keys'),
                         (project, queue, option))
        self.assertIn('empty word', reason)


class RealMongoSourceTest(MongoSourceTest):
    """The reader against a real MongoDB, when the variable names one."""

    def setUp(self):
        self.uri, self.client = fixtures.real_server(
            self, 'the data source (it ran against mongomock)')
        name = fixtures.fresh_database(self, self.client)
        self.coll = self.client[name].subscriptions
        self.docs = documents(23)
        self.coll.insert_many(self.docs)
        self.database = name

    def reader(self, **options):
        options.setdefault('uri', self.uri)
        options.setdefault('database', self.database)
        return mongo_source.MongoReader(options)

    def test_database_from_the_uri_or_the_default(self):
        self.skipTest('option parsing: covered by MongoSourceTest')

    def test_policies_kind_reads_the_store(self):
        self.skipTest('the store over mongomock: covered by MongoSourceTest; '
                      'the real store by tests.functional.spark')
