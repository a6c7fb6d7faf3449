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

"""Tests of the backfill job's pure transforms (no Spark)."""

import datetime
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', '..',
                                'spark'))
from zaqar_filtering_backfill import transform  # noqa: E402

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def line(**fields):
    item = {'id': 'sub1', 'source': 'q', 'subscriber': 'http://x',
            'ttl': 3600, 'options': {}, 'project': 'p1'}
    item.update(fields)
    return json.dumps(item)


class ClassifyTest(unittest.TestCase):

    def outcome(self, text):
        return transform.classify(transform.from_json_line(text, NOW), NOW)

    def test_valid_policy_is_normalized(self):
        out = self.outcome(line(options={'filter_policies': ['b', 'a', 'b']}))
        self.assertEqual(transform.VALID, out['outcome'])
        self.assertEqual({'filter_policies': ['a', 'b']},
                         out['record'].policy)

    def test_invalid_policy_names_option_and_rule(self):
        out = self.outcome(line(options={'filter_policies': ['x' * 17]}))
        self.assertEqual(transform.INVALID, out['outcome'])
        self.assertEqual('filter_policies', out['option'])
        self.assertIn('17 characters', out['reason'])

    def test_expired_is_skipped(self):
        out = self.outcome(line(ttl=-1,
                                options={'filter_policies': ['a']}))
        self.assertEqual(transform.EXPIRED, out['outcome'])

    def test_no_policy(self):
        self.assertEqual(transform.NO_POLICY,
                         self.outcome(line())['outcome'])

    def test_bad_json_line_is_explained(self):
        self.assertRaisesRegex(ValueError, 'not valid JSON',
                               transform.from_json_line, '{oops', NOW)
        self.assertRaisesRegex(ValueError, "no 'source' field",
                               transform.from_json_line, '{"id": 1}', NOW)

    def test_mongo_document(self):
        sub = transform.from_mongo(
            {'_id': 'abc', 's': 'q', 'u': 'mailto:a@b', 't': 60,
             'e': datetime.datetime(2027, 1, 1), 'o': {'binding_keys': ['#']},
             'p': 'p1', 'c': True})
        self.assertEqual(transform.VALID,
                         transform.classify(sub, NOW)['outcome'])

    def test_topic_subscription_keeps_its_source(self):
        # The server keeps a topic's records under the source topic:NAME,
        # which is no queue name: the backfill must write them there too.
        out = self.outcome(line(source='topic:orders',
                                subscriber='queue:placed',
                                options={'binding_keys': ['order.#']}))
        self.assertEqual(transform.VALID, out['outcome'])
        self.assertEqual(('topic:orders', 'queue:placed'),
                         (out['record'].queue, out['record'].subscriber))
        sub = transform.from_mongo(
            {'_id': 'abc', 's': 'topic:orders', 'u': 'queue:placed',
             'o': {'filter_policies': 'x'}, 'p': 'p1'})
        out = transform.classify(sub, NOW)
        self.assertEqual((transform.INVALID, 'topic:orders'),
                         (out['outcome'], out['queue']))

    def test_summary_counts(self):
        outs = [self.outcome(line()),
                self.outcome(line(options={'filter_policies': ['a']})),
                self.outcome(line(options={'filter_policies': ['x' * 17]}))]
        summary = transform.summarize(outs)
        self.assertEqual(3, summary['total'])
        self.assertEqual(2, summary['with_policy'])
        self.assertEqual(1, summary['invalid'])
        self.assertEqual(3, sum(summary['projects']['p1'].values()))


class SummaryAndDriftTest(unittest.TestCase):

    def test_summary_from_counts(self):
        summary = transform.summary_from_counts(
            [((transform.VALID, 'p1', None), 5),
             ((transform.INVALID, 'p1', 'tag_length'), 2),
             ((transform.INVALID, 'p2', 'tag_length'), 1),
             ((transform.INVALID, 'p2', 'policy_type'), 1),
             ((transform.EXPIRED, 'p2', None), 3),
             ((transform.NO_POLICY, None, None), 4)], upserted=4,
            unchanged=1)
        self.assertEqual(16, summary['total'])
        self.assertEqual(9, summary['with_policy'])
        self.assertEqual({'policy_type': 1, 'tag_length': 3},
                         summary['errors_by_rule'])
        self.assertEqual({'None': {'no_policy': 4},
                          'p1': {'invalid': 2, 'valid': 5},
                          'p2': {'expired': 3, 'invalid': 2}},
                         summary['projects'])
        self.assertEqual((4, 1), (summary['upserted'], summary['unchanged']))

    def test_mongo_row(self):
        sub = transform.from_mongo_row(
            ('abc', 'q', 'http://x', '2027-01-01T00:00:00+00:00',
             '{"filter_policies": ["a"]}', 'p1'))
        self.assertEqual(transform.VALID,
                         transform.classify(sub, NOW)['outcome'])
        self.assertRaisesRegex(ValueError, "no 'u' field",
                               transform.from_mongo_row,
                               ('abc', 'q', None, None, None, 'p1'))

    def test_drift(self):
        fp = ('h1', 'http://x', '2027-01-01T00:00:00+00:00')
        self.assertIsNone(transform.drift(fp, fp))
        self.assertIsNone(transform.drift(
            fp, ('h1', 'http://x', '2027-01-01T00:00:01+00:00')))
        self.assertEqual(transform.STALE, transform.drift(
            fp, ('h1', 'http://x', '2027-01-01T00:00:02+00:00')))
        self.assertEqual(transform.STALE,
                         transform.drift(fp, ('h2',) + fp[1:]))
        self.assertEqual(transform.STALE,
                         transform.drift(fp, fp[:2] + (None,)))
        self.assertEqual(transform.MISSING, transform.drift(fp, None))
        self.assertEqual(transform.ORPHANED, transform.drift(None, fp))
