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

"""The subscription-pipeline stage: 400 on invalid policies, normalized
options otherwise, and the notifier's cache told of every change."""

import unittest

from oslo_config import cfg
from zaqar.transport import validation

from tests.unit.stages.test_matcher_cache import Clock
from tests.unit.stages.test_matcher_cache import FakeSubscriptions
from zaqar_filtering import DEFAULT_LIMITS
from zaqar_filtering.stages import matcher_cache
from zaqar_filtering.stages.validation import ValidationStage


class TestValidationStage(unittest.TestCase):

    def setUp(self):
        self.addCleanup(cfg.CONF.reset)
        self.stage = ValidationStage()

    def test_invalid_policy_is_a_validation_failure(self):
        options = {'filter_policies': ['abcdefghijklmnopq']}
        with self.assertRaises(validation.ValidationFailed) as caught:
            self.stage.create('q', 'http://x', 3600, options, project='p')
        self.assertEqual("filter_policies: tag 'abcdefghijklmnopq' has 17 "
                         "characters; the limit is 16", str(caught.exception))
        self.assertEqual({'filter_policies': ['abcdefghijklmnopq']}, options)

    def test_braces_in_the_text_survive(self):
        with self.assertRaises(validation.ValidationFailed) as caught:
            self.stage.update('q', 'id', project='p', options={
                'filter_policy': {'k': {'prefix': 'a'}}})
        self.assertIn('"prefix" must be an object or an array',
                      str(caught.exception))
        with self.assertRaises(validation.ValidationFailed) as caught:
            self.stage.create('q', 'http://x', 60, {'filter_policy': [{}]})
        self.assertEqual('filter_policy: must be a JSON object, not [{}]',
                         str(caught.exception))

    def test_valid_options_are_normalized_in_place(self):
        options = {'filter_policies': ['b', 'a', 'b'], 'binding_keys': [],
                   '_retry_policy': {'retries_with_no_delay': 1}}
        self.assertIsNone(self.stage.create('q', 'http://x', 60, options))
        self.assertEqual({'filter_policies': ['a', 'b'],
                          '_retry_policy': {'retries_with_no_delay': 1}},
                         options)

    def test_update_without_options(self):
        self.assertIsNone(self.stage.update('q', 'id', project='p', ttl=60))

    def test_every_change_invalidates_the_queue(self):
        store = FakeSubscriptions()
        store.put('p', 'q', 'a', {})
        clock = Clock()
        cache = matcher_cache.MatcherCache(store, DEFAULT_LIMITS, 60,
                                           clock=clock)
        changes = [
            lambda: self.stage.create('q', 'http://x', 60, {}, project='p'),
            lambda: self.stage.update('q', 'a', project='p', options={}),
            lambda: self.stage.confirm('q', 'a', project='p',
                                       confirmed=True),
            lambda: self.stage.delete('q', 'a', project='p'),
        ]
        for change in changes:
            clock.now += matcher_cache.SETTLING_SECONDS
            cache.get('p', 'q')
            cache.get('p', 'q')
            calls = store.list_calls
            change()
            cache.get('p', 'q')
            self.assertEqual(calls + 1, store.list_calls)
