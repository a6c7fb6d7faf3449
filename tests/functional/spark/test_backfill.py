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

"""The backfill job on a real local Spark session (one for the suite).

JSON Lines sources run through ``spark/backfill_policies.py``'s ``run``
on the shared session, with a file-backed store; the MongoDB source and
store run when ZAQAR_FILTERING_TEST_MONGODB_URL names a server. One test
runs the command itself with ``python``, which starts its own local[*].
"""

import datetime
import glob
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..'))
sys.path.insert(0, os.path.join(ROOT, 'spark'))
import backfill_policies  # noqa: E402
from tests.functional.spark import doubles  # noqa: E402
from tests.functional.spark import session  # noqa: E402
from tests.unit.store import fixtures  # noqa: E402
from zaqar_filtering_backfill import job  # noqa: E402

SCRIPT = os.path.join(ROOT, 'spark', 'backfill_policies.py')


def line(sub_id, options, ttl=3600, project='p1', queue='q1'):
    return json.dumps({'id': sub_id, 'source': queue,
                       'subscriber': 'http://x/%s' % sub_id, 'ttl': ttl,
                       'options': options, 'project': project})


#: Six valid (two projects), three invalid, two expired, two without a
#: policy, one unreadable line, and a blank line that is no subscription.
LINES = [
    line('v1', {'filter_policies': ['a', 'b']}),
    line('v2', {'binding_keys': ['order.*.created']}),
    line('v3', {'filter_policy': {'store': ['s1']}}),
    line('v4', {'filter_policy': {'tier': ['gold']},
                'filter_policy_scope': 'MessageBody'}, project='p2'),
    line('v5', {'filter_policies': ['c']}, project='p2', queue='q2'),
    line('v6', {'binding_keys': ['#']}, project='p2', queue='q2'),
    line('i1', {'filter_policies': ['x' * 17]}),
    line('i2', {'binding_keys': ['a..b']}, project='p2'),
    line('i3', {'filter_policy': {'price': [{'numeric': ['>']}]}}),
    line('e1', {'filter_policies': ['a']}, ttl=-10),
    line('e2', {'filter_policies': ['x' * 17]}, ttl=-10, project='p2'),
    line('n1', {}),
    line('n2', {'other': 1}, project='p2'),
    '{"id": "broken"',
    '',
]


class BackfillTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        reason = session.java_missing()
        if reason:
            raise unittest.SkipTest(reason)
        cls.spark = session.get()

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix='zaqar-filtering-backfill-')
        self.addCleanup(shutil.rmtree, self.dir)
        self.source = os.path.join(self.dir, 'subs.jsonl')
        self.write_source(LINES)
        self.report = os.path.join(self.dir, 'report')
        self.progress = []
        self.target = doubles.FileTarget(
            os.path.join(self.dir, 'store.json'))

    def write_source(self, lines, exported=None):
        with open(self.source, 'w') as out:
            out.write('\n'.join(lines) + '\n')
        if exported:
            os.utime(self.source, (exported, exported))

    def run_job(self, *extra, target=None):
        argv = ['--source', self.source, '--report', self.report]
        if '--dry-run' not in extra:
            argv += ['--store', 'mongodb://unused.invalid/x']
        args = backfill_policies.parse_args(argv + list(extra))
        out = io.StringIO()
        status = backfill_policies.run(args, self.spark,
                                       target or self.target, out,
                                       progress=self.progress.append)
        return status, self.summary(), out.getvalue()

    def summary(self):
        with open(os.path.join(self.report, 'summary.json')) as f:
            return json.load(f)

    def lines(self, name):
        found = []
        for part in sorted(glob.glob(os.path.join(self.report, name,
                                                  'part-*.json'))):
            with open(part) as f:
                found.extend(json.loads(text) for text in f)
        return found

    def test_dry_run_report(self):
        status, summary, table = self.run_job('--dry-run')
        self.assertEqual(0, status)
        self.assertEqual(
            {'total': 14, 'with_policy': 9, 'valid': 6, 'invalid': 3,
             'expired': 2, 'no_policy': 2, 'unreadable': 1, 'upserted': 0,
             'unchanged': 0, 'dry_run': True},
            {name: summary[name] for name in
             ('total', 'with_policy', 'valid', 'invalid', 'expired',
              'no_policy', 'unreadable', 'upserted', 'unchanged',
              'dry_run')})
        self.assertEqual({'binding_key_empty_word': 1, 'numeric_syntax': 1,
                          'tag_length': 1}, summary['errors_by_rule'])
        self.assertEqual(
            {'p1': {'valid': 3, 'invalid': 2, 'expired': 1, 'no_policy': 1},
             'p2': {'valid': 3, 'invalid': 1, 'expired': 1, 'no_policy': 1},
             'None': {'unreadable': 1}}, summary['projects'])
        invalid = {(item['subscription_id'] or 'unreadable'): item
                   for item in self.lines('invalid')}
        self.assertEqual({'i1', 'i2', 'i3', 'unreadable'}, set(invalid))
        self.assertEqual({'project': 'p2', 'queue': 'q1',
                          'subscription_id': 'i2', 'option': 'binding_keys',
                          'reason': invalid['i2']['reason']}, invalid['i2'])
        self.assertIn('empty word', invalid['i2']['reason'])
        self.assertEqual('filter_policy/price/0/numeric',
                         invalid['i3']['option'])
        self.assertIn('not valid JSON', invalid['unreadable']['reason'])
        self.assertEqual({}, self.target.stored())    # nothing written
        self.assertRegex(table, r'valid +6\n')
        self.assertIn('invalid: tag_length', table)
        self.assertIn('reading and validating', self.progress[0])

    def test_second_run_changes_nothing(self):
        status, first, _ = self.run_job()
        self.assertEqual(0, status)
        self.assertEqual((6, 0), (first['upserted'], first['unchanged']))
        stored = self.target.stored()
        self.assertEqual({'p1|q1|v1', 'p1|q1|v2', 'p1|q1|v3', 'p2|q1|v4',
                          'p2|q2|v5', 'p2|q2|v6'}, set(stored))
        _, second, _ = self.run_job()
        self.assertEqual((0, 6), (second['upserted'], second['unchanged']))
        self.assertEqual(stored, self.target.stored())
        lines = list(LINES)
        lines[0] = line('v1', {'filter_policies': ['changed']})
        # The same snapshot: ttls count from the export's time.
        self.write_source(lines, exported=os.path.getmtime(self.source))
        _, third, _ = self.run_job()
        self.assertEqual((1, 5), (third['upserted'], third['unchanged']))

    def test_a_later_run_over_the_same_export_changes_nothing(self):
        exported = time.time() - 30
        self.write_source(LINES, exported=exported)
        self.run_job()
        expires = self.target.stored()['p1|q1|v1'][2]
        self.assertEqual(
            datetime.datetime.fromtimestamp(exported + 3600,
                                            datetime.timezone.utc)
            .replace(microsecond=0).isoformat(), expires)

    def test_validate_reports_missing_stale_and_orphaned(self):
        self.run_job()
        status, summary, table = self.run_job('--validate')
        self.assertEqual(0, status)
        self.assertEqual((6, 0, 0, 0), (summary['in_sync'],
                                        summary['missing'],
                                        summary['stale'],
                                        summary['orphaned']))
        stored = self.target.stored()
        del stored['p1|q1|v1']
        stored['p1|q1|v2'][0] = 'another hash'
        stored['p1|q9|gone'] = list(stored['p2|q2|v5'])
        self.target.save(stored)
        status, summary, table = self.run_job('--validate')
        self.assertEqual(backfill_policies.EXIT_DRIFT, status)
        self.assertEqual((4, 1, 1, 1), (summary['in_sync'],
                                        summary['missing'],
                                        summary['stale'],
                                        summary['orphaned']))
        self.assertEqual(
            [('p1', 'q1', 'v1', 'missing'), ('p1', 'q1', 'v2', 'stale'),
             ('p1', 'q9', 'gone', 'orphaned')],
            sorted((item['project'], item['queue'], item['subscription_id'],
                    item['problem']) for item in self.lines('drift')))
        self.assertEqual(stored, self.target.stored())    # not written
        self.assertRegex(table, r'orphaned +1\n')
        self.run_job('--dry-run')
        self.assertEqual([], self.lines('drift'))    # not left behind

    def test_command_line_runs_on_local_spark(self):
        result = subprocess.run(
            [sys.executable, SCRIPT, '--source', self.source, '--report',
             self.report, '--dry-run', '--master', 'local[1]'],
            capture_output=True, text=True, timeout=300)
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertRegex(result.stdout, r'total +14\n')
        self.assertIn('reading and validating', result.stderr)
        self.assertEqual(14, self.summary()['total'])

    def test_mongodb_data_source_on_spark(self):
        # The data source through Spark (planning on the driver, reads in
        # the Python workers), each client a mongomock one over a file.
        import bson
        expires = (datetime.datetime.now(datetime.timezone.utc)
                   + datetime.timedelta(hours=1))
        docs = []
        for index in range(30):
            options = [{'filter_policies': ['t%d' % index]},
                       {'binding_keys': ['a..b']}, {}][index % 3]
            docs.append({'_id': bson.ObjectId(), 's': 'q%d' % (index % 4),
                         'u': 'http://x/%d' % index, 't': 3600,
                         'e': expires, 'o': options,
                         'p': 'p%d' % (index % 2), 'c': True})
        docs[3]['e'] = expires - datetime.timedelta(hours=2)
        del docs[6]['s']
        path = os.path.join(self.dir, 'docs.json')
        doubles.save_documents(path, docs)
        source = 'mongodb://mongomock.invalid/zaqar_subscriptions'
        data_source = doubles.mongomock_source(path, 'zaqar_subscriptions')
        for upserted, unchanged in ((8, 0), (0, 8)):
            summary = job.run(self.spark, source, self.report, self.target,
                              progress=self.progress.append,
                              partition_size=7, data_source=data_source)
            self.assertEqual(
                (30, 8, 10, 10, 1, 1, upserted, unchanged),
                (summary['total'], summary['valid'], summary['invalid'],
                 summary['no_policy'], summary['expired'],
                 summary['unreadable'], summary['upserted'],
                 summary['unchanged']))
        self.assertIn('(5 partitions)', self.progress[0])
        self.assertEqual({'p0': {'valid': 4, 'invalid': 5, 'no_policy': 5},
                          'p1': {'valid': 4, 'invalid': 5, 'no_policy': 5,
                                 'expired': 1},
                          'None': {'unreadable': 1}},
                         summary['projects'])
        self.assertEqual(
            {'p0|q0|%s' % docs[index]['_id'] for index in (0, 12, 24)},
            {key for key in self.target.stored() if '|q0|' in key})
        summary = job.run(self.spark, source, self.report, self.target,
                          validate=True, progress=self.progress.append,
                          data_source=data_source)
        self.assertEqual((8, 0, 0, 0),
                         (summary['in_sync'], summary['missing'],
                          summary['stale'], summary['orphaned']))

    def test_mongodb_source_and_store(self):
        uri, client = fixtures.real_server(
            self, 'the backfill from and to MongoDB (the data source and '
                  'the write path ran against mongomock in '
                  'tests.unit.spark.test_mongo_source)')
        import bson
        subs_db = fixtures.fresh_database(self, client, 'subs_')
        store_db = fixtures.fresh_database(self, client, 'store_')
        expires = (datetime.datetime.now(datetime.timezone.utc)
                   + datetime.timedelta(hours=1))
        docs = []
        for index in range(30):
            options = ({'filter_policies': ['t%d' % index]} if index % 3
                       else {'binding_keys': ['a..b']})
            docs.append({'_id': bson.ObjectId(), 's': 'q%d' % (index % 4),
                         'u': 'http://x/%d' % index, 't': 3600,
                         'e': expires, 'o': options, 'p': 'p1', 'c': True})
        client[subs_db].subscriptions.insert_many(docs)
        base, _, query = uri.partition('?')
        base = base.rstrip('/')
        base = base if base.count('/') == 2 else base.rsplit('/', 1)[0]
        query = '?' + query if query else ''
        self.source = '%s/%s%s' % (base, subs_db, query)
        store_uri = '%s/%s%s' % (base, store_db, query)
        args = ['--source', self.source, '--report', self.report,
                '--store', store_uri, '--partition-size', '7']
        for upserted, unchanged in ((20, 0), (0, 20)):
            status = backfill_policies.run(
                backfill_policies.parse_args(args), self.spark,
                out=io.StringIO(), progress=self.progress.append)
            summary = self.summary()
            self.assertEqual(0, status)
            self.assertEqual((30, 20, 10, upserted, unchanged),
                             (summary['total'], summary['valid'],
                              summary['invalid'], summary['upserted'],
                              summary['unchanged']))
        status = backfill_policies.run(
            backfill_policies.parse_args(args + ['--validate']), self.spark,
            out=io.StringIO(), progress=self.progress.append)
        self.assertEqual(0, status)
        self.assertEqual(20, self.summary()['in_sync'])
