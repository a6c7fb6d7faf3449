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
options otherwise, the policy store told of every change, and the syncer
that lands changes and copies queues to the store."""

import threading
import time
import unittest

from oslo_config import cfg
from zaqar.transport import validation

from tests.unit.stages.test_matcher_cache import FakeSubscriptions
from tests.unit.store import fixtures
from zaqar_filtering import DEFAULT_LIMITS
from zaqar_filtering.stages import store_sync
from zaqar_filtering.stages.validation import ValidationStage
from zaqar_filtering.store.base import StoreUnavailable
from zaqar_filtering.store.versions import Version


def wait_for(condition, timeout=5):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError('timed out waiting for %s' % condition)
        time.sleep(0.01)


class TestValidationStage(unittest.TestCase):

    def setUp(self):
        self.addCleanup(cfg.CONF.reset)
        self.subscriptions = FakeSubscriptions()
        self.store = fixtures.mongomock_store()
        self.syncer = store_sync.StoreSyncer(
            self.store, cfg.CONF, DEFAULT_LIMITS,
            controller=self.subscriptions, delays=(0.05, 0.2))
        self.stage = ValidationStage(store=self.store, syncer=self.syncer,
                                     writer=self.subscriptions)

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
        created = self.stage.create('q', 'http://x', 60, options)
        normalized = {'filter_policies': ['a', 'b'],
                      '_retry_policy': {'retries_with_no_delay': 1}}
        self.assertEqual(normalized, options)
        self.assertEqual(normalized, self.subscriptions.get(
            'q', created)['options'])

    def test_a_create_is_written_and_its_id_logged(self):
        created = self.stage.create('q', 'http://x', 60, {}, project='p')
        self.assertEqual('new1', created)
        changes = self.store.changes('p', 'q', 0)
        self.assertEqual([(1, []), (2, [{'id': 'new1'}])], changes.entries)
        # Zaqar answers 409 for a subscriber the queue already has.
        self.assertIsNone(self.stage.create('q', 'http://x', 60, {},
                                            project='p'))
        self.assertEqual(1, self.subscriptions.created)

    def test_updates_deletes_and_confirms_log_their_subscription(self):
        self.stage.update('q', 'a', project='p', ttl=60)
        self.stage.confirm('q', 'b', project='p', confirmed=True)
        self.stage.delete('q', 'c', project='p')
        self.assertEqual([(1, [{'id': 'a'}]), (2, [{'id': 'b'}]),
                          (3, [{'id': 'c'}])],
                         self.store.changes('p', 'q', 0).entries)

    def test_update_without_options(self):
        self.assertIsNone(self.stage.update('q', 'id', project='p', ttl=60))

    def test_every_change_starts_then_lands_in_the_store(self):
        self.subscriptions.put('p', 'q', 'a', {'filter_policies': ['t']})
        changes = [
            lambda: self.stage.create('q', 'http://x', 60, {}, project='p'),
            lambda: self.stage.update('q', 'a', project='p', options={}),
            lambda: self.stage.confirm('q', 'a', project='p',
                                       confirmed=True),
            lambda: self.stage.delete('q', 'a', project='p'),
        ]
        for number, change in enumerate(changes):
            before = self.store.version('p', 'q')
            change()
            # Started before Zaqar writes: the change is in flight.
            version = self.store.version('p', 'q')
            self.assertGreater(version.started, before.started)
            self.assertLess(version.landed, version.started)
            # The syncer lands it, then moves the version once more.
            wait_for(lambda: self.store.version('p', 'q').landed
                     >= version.started + 1)
            version = self.store.version('p', 'q')
            self.assertEqual(version.started, version.landed)
        self.assertEqual(Version(0, 0), self.store.version('other', 'q'))

    def test_the_syncer_copies_the_queue_to_the_store(self):
        created = self.stage.create('q', 'http://x/a', 60,
                                    {'filter_policies': ['b', 'a']},
                                    project='p')
        wait_for(lambda: created in self.store.load('p', 'q'))
        self.assertEqual({'filter_policies': ['a', 'b']},
                         self.store.load('p', 'q')[created].policy)
        self.stage.delete('q', created, project='p')
        del self.subscriptions.queues[('p', 'q')][created]
        wait_for(lambda: not self.store.load('p', 'q'))

    def test_changes_are_refused_while_the_store_is_down(self):
        store = fixtures.unreachable_store()
        self.addCleanup(store.close)
        stage = ValidationStage(store=store, syncer=self.syncer,
                                writer=self.subscriptions)
        for change in (
                lambda: stage.create('q', 'http://x', 60, {}, project='p'),
                lambda: stage.update('q', 'a', project='p', ttl=60),
                lambda: stage.delete('q', 'a', project='p')):
            with self.assertLogs('zaqar_filtering.stages.validation',
                                 'ERROR') as logs:
                self.assertRaises(StoreUnavailable, change)
            self.assertIn('Refused a subscription change of queue q '
                          '(project p): policy store mongodb is unavailable',
                          logs.output[0])


class SlowlyBackStore:
    """A real store that is unreachable for its first ``failures`` calls."""

    def __init__(self, store, failures):
        self._store = store
        self._down = fixtures.unreachable_store()
        self.failures = failures
        self.keeps_records = store.keeps_records
        self.lock = threading.Lock()

    def __getattr__(self, name):
        with self.lock:
            failing = self.failures > 0
            if failing:
                self.failures -= 1
        return getattr(self._down if failing else self._store, name)


class TestStoreSyncer(unittest.TestCase):

    def setUp(self):
        self.subscriptions = FakeSubscriptions()
        self.store = fixtures.mongomock_store()

    def syncer(self, store, delays=(0.05,)):
        return store_sync.StoreSyncer(store, cfg.CONF, DEFAULT_LIMITS,
                                      controller=self.subscriptions,
                                      delays=delays, retry_seconds=0.05)

    def test_changes_close_together_make_one_job(self):
        syncer = self.syncer(self.store, delays=(0.2,))
        for _ in range(5):
            started = self.store.change_started('p', 'q')
            syncer.changed('p', 'q', started)
        wait_for(lambda: self.store.version('p', 'q').landed == 5)
        self.assertEqual(1, self.subscriptions.list_calls)

    def test_retries_while_the_store_is_down(self):
        store = SlowlyBackStore(self.store, failures=2)
        syncer = self.syncer(store)
        started = self.store.change_started('p', 'q')
        with self.assertLogs(store_sync.LOG.logger, 'WARNING') as logs:
            syncer.changed('p', 'q', started)
            wait_for(lambda: self.store.version('p', 'q').landed == 1)
        self.assertIn('attempt 1 of 12', logs.output[0])
