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

"""The external SNS filter-policy corpus (tests/data/conformance/), one test
per case: invalid policies are rejected, the others match as recorded, and
a non-match is explained while a match is not."""

import collections
import json
import pathlib
import re
import unittest

import zaqar_filtering
from zaqar_filtering.policy.message import MessageView
from zaqar_filtering.policy.subscription import parse_options

CASES = json.loads(
    (pathlib.Path(__file__).parent.parent / 'data' / 'conformance'
     / 'sns_filter_policy_cases.json').read_text('utf-8'))

# Rejected as AWS rejects them, in our own words. AWS says "prefix match
# pattern must be a string" of a cidr operand that is not a string.
OWN_WORDING = {'aws-sns-invalid-error-condition-bad-type'}


# The operators of the SNS grammar, "exact" for plain values.
OPERATORS = ('exact', 'prefix', 'suffix', 'equals-ignore-case',
             'anything-but', 'numeric', 'exists', 'cidr', '$or')


def operators(policy):
    """Yield the operators a filter policy uses."""
    for key, value in policy.items():
        if key == '$or':
            yield key
            for alternative in value:
                yield from operators(alternative)
        elif isinstance(value, dict):
            yield from operators(value)
        else:
            for rule in value:
                yield next(iter(rule)) if isinstance(rule, dict) else 'exact'


def options_of(case):
    return {'filter_policy': case['policy'],
            'filter_policy_scope': case['scope']}


def message_of(case):
    if case['scope'] == 'MessageAttributes':
        return {'attributes': case['message']}
    return {'body': case.get('message_raw', case['message'])}


class TestConformance(unittest.TestCase):

    def test_corpus_is_complete(self):
        self.assertEqual(308, len(CASES))
        self.assertEqual(190, sum(case['aws_validated'] for case in CASES))

    def test_every_operator_is_explained(self):
        # Each operator has recorded matches and non-matches, so the
        # per-case explanation checks below cover every one of them.
        seen = collections.Counter()
        for case in CASES:
            if case['expected'] != 'invalid':
                for operator in operators(case['policy']):
                    seen[operator, case['expected']] += 1
        for operator in OPERATORS:
            for expected in ('match', 'no_match'):
                with self.subTest(operator=operator, expected=expected):
                    self.assertGreater(seen[operator, expected], 0)

    def check(self, case):
        options = options_of(case)
        if case['expected'] == 'invalid':
            with self.assertRaises(zaqar_filtering.InvalidPolicy) as caught:
                zaqar_filtering.validate_options(options)
            self.assertTrue(str(caught.exception).startswith('filter_policy'))
            expected = case.get('error_contains', '')
            if case['id'] not in OWN_WORDING:
                self.assertIn(expected.replace('FilterPolicy: ', ''),
                              str(caught.exception))
            return
        zaqar_filtering.validate_options(options)
        message = message_of(case)
        wanted = case['expected'] == 'match'
        policy = parse_options(options)
        self.assertEqual(wanted, policy.matches(MessageView(message)),
                         'per-subscription evaluation')
        reason = policy.explain(MessageView(message))
        if wanted:
            self.assertIsNone(reason, 'a match has no reason')
        else:
            self.assertRegex(reason, r'^filter_policy: \S',
                             'a non-match has a reason')
        matcher = zaqar_filtering.Matcher()
        matcher.add('sub', options)
        matcher.add('other', {'filter_policy': {'zzz': ['never']}})
        self.assertEqual({'sub'} if wanted else set(),
                         matcher.match(message), 'Matcher')


def _add_case(case):
    def test(self):
        self.check(case)
    name = 'test_' + re.sub(r'\W', '_', case['id'])
    test.__name__ = name
    test.__doc__ = '%s (%s)' % (case['id'], case['expected'])
    setattr(TestConformance, name, test)


for _case in CASES:
    _add_case(_case)
