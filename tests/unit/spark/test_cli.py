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

"""The backfill command's arguments (no Spark session is started)."""

import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', '..',
                                'spark'))
import backfill_policies  # noqa: E402
from zaqar_filtering_backfill import job  # noqa: E402


class ArgumentsTest(unittest.TestCase):

    def setUp(self):
        self.source = tempfile.NamedTemporaryFile(suffix='.jsonl')
        self.addCleanup(self.source.close)

    def error(self, *argv):
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            with self.assertRaises(SystemExit) as caught:
                backfill_policies.parse_args(list(argv))
        self.assertEqual(2, caught.exception.code)
        return stderr.getvalue()

    def test_store_is_required_unless_dry_run(self):
        message = self.error('--source', self.source.name, '--report', 'r')
        self.assertIn('--store is required unless --dry-run', message)
        args = backfill_policies.parse_args(
            ['--source', self.source.name, '--report', 'r', '--dry-run'])
        self.assertTrue(args.dry_run)

    def test_wrong_arguments_are_named(self):
        self.assertIn('--source: no such file or directory: /nonexistent',
                      self.error('--source', '/nonexistent', '--report', 'r',
                                 '--dry-run'))
        self.assertIn('--store must be a mongodb://',
                      self.error('--source', self.source.name, '--report',
                                 'r', '--store', 'redis://h'))
        self.assertIn('--report: %s exists and is not a directory'
                      % self.source.name,
                      self.error('--source', self.source.name, '--report',
                                 self.source.name, '--dry-run'))
        self.assertIn('not allowed with argument',
                      self.error('--source', self.source.name, '--report',
                                 'r', '--store', 'mongodb://h/db',
                                 '--dry-run', '--validate'))
        self.assertIn('the following arguments are required: --source',
                      self.error('--report', 'r'))

    def test_mongodb_source_needs_no_file(self):
        args = backfill_policies.parse_args(
            ['--source', 'mongodb://db1/zaqar_subscriptions', '--report',
             'r', '--store', 'mongodb://db1/zaqar_filtering', '--validate'])
        self.assertTrue(args.validate)

    def test_the_report_names_uris_without_passwords(self):
        self.assertEqual('mongodb://zaqar:***@db1:27017/z?replicaSet=rs0',
                         job._safe('mongodb://zaqar:secret@db1:27017/z'
                                   '?replicaSet=rs0'))
        self.assertEqual('mongodb://db1/z', job._safe('mongodb://db1/z'))
        self.assertEqual('/data/subs.jsonl', job._safe('/data/subs.jsonl'))
