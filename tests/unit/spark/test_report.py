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

"""Tests of the backfill report files and table (no Spark)."""

import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', '..',
                                'spark'))
from zaqar_filtering_backfill import report  # noqa: E402
from zaqar_filtering_backfill import transform  # noqa: E402


class ReportTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def test_files_hold_counts_and_invalid_lines(self):
        bad = {'outcome': transform.INVALID, 'project': 'p',
               'queue': 'q', 'subscription_id': 's1',
               'option': 'filter_policies/0', 'rule': 'tag_length',
               'reason': 'too long'}
        ok = {'outcome': transform.NO_POLICY, 'project': 'p'}
        summary = transform.summarize([bad, ok])
        report.write_report(self.dir, summary, [bad, ok])
        with open(os.path.join(self.dir, 'summary.json')) as f:
            self.assertEqual(1, json.load(f)['invalid'])
        with open(os.path.join(self.dir, 'invalid',
                               'part-00000.jsonl')) as f:
            lines = [json.loads(x) for x in f]
        self.assertEqual([{'project': 'p', 'queue': 'q',
                           'subscription_id': 's1',
                           'option': 'filter_policies/0',
                           'reason': 'too long'}], lines)
        table = report.format_table(summary)
        self.assertIn('invalid: tag_length', table)
