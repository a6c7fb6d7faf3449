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

"""The notifier's per-queue matcher cache."""

import unittest

from zaqar_filtering import DEFAULT_LIMITS
from zaqar_filtering.stages import matcher_cache


class FakeSubscriptions:
    """Zaqar's subscription controller protocol, in memory.

    ``list`` returns a generator that yields one page, then the marker of
    the next page (None at the end).
    """

    def __init__(self):
        self.queues = {}
        self.list_calls = 0

    def list(self, queue, project=None, marker=None, limit=10):
        self.list_calls += 1
        subs = sorted(self.queues.get((project, queue), {}).values(),
                      key=lambda sub: sub['id'])
        start = 0 if marker is None else [s['id'] for s in subs].index(
            marker) + 1
        page = subs[start:start + limit]
        yield page
        yield page[-1]['id'] if start + limit < len(subs) else None

    def put(self, project, queue, sub_id, options, ttl=3600, age=0):
        self.queues.setdefault((project, queue), {})[sub_id] = {
            'id': sub_id, 'source': queue, 'subscriber': 'http://x/' + sub_id,
            'ttl': ttl, 'age': age, 'options': options, 'confirmed': True}


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class TestMatcherCache(unittest.TestCase):

    def setUp(self):
        self.store = FakeSubscriptions()
        self.clock = Clock()
        self.cache = matcher_cache.MatcherCache(self.store, DEFAULT_LIMITS,
                                                max_age=10, clock=self.clock)

    def matched(self, message, project='p', queue='q'):
        return self.cache.get(project, queue).matcher.match(message)

    def test_built_once_then_reused(self):
        self.store.put('p', 'q', 'a', {'filter_policies': ['x']})
        self.assertEqual({'a'}, self.matched({'filter_policies': ['x']}))
        self.assertEqual({'a'}, self.matched({'filter_policies': ['x']}))
        self.assertEqual(1, self.store.list_calls)

    def test_lists_every_page(self):
        for number in range(matcher_cache.PAGE_SIZE * 2 + 5):
            self.store.put('p', 'q', '%05d' % number, {})
        self.assertEqual(matcher_cache.PAGE_SIZE * 2 + 5,
                         len(self.matched({})))

    def test_a_change_applies_to_the_next_post(self):
        self.store.put('p', 'q', 'a', {'filter_policies': ['x']})
        self.assertEqual({'a'}, self.matched({'filter_policies': ['x']}))
        matcher_cache.invalidate('p', 'q')
        self.store.put('p', 'q', 'a', {'filter_policies': ['y']})
        self.assertEqual(set(), self.matched({'filter_policies': ['x']}))
        # While the change settles, every post lists again ...
        self.matched({})
        self.assertEqual(3, self.store.list_calls)
        # ... and afterwards the matcher is cached again.
        self.clock.now += matcher_cache.SETTLING_SECONDS
        self.matched({})
        self.matched({})
        self.assertEqual(4, self.store.list_calls)

    def test_other_queues_and_projects_keep_their_entry(self):
        self.store.put('p', 'q', 'a', {})
        self.store.put('other', 'q', 'b', {})
        self.assertEqual({'a'}, self.matched({}))
        self.assertEqual({'b'}, self.matched({}, project='other'))
        matcher_cache.invalidate('other', 'q')
        self.matched({})
        self.assertEqual(2, self.store.list_calls)

    def test_entries_expire(self):
        self.store.put('p', 'q', 'a', {})
        self.matched({})
        self.clock.now += 9.9
        self.matched({})
        self.assertEqual(1, self.store.list_calls)
        self.clock.now += 0.1
        self.matched({})
        self.assertEqual(2, self.store.list_calls)

    def test_rebuilt_when_a_subscription_expires(self):
        self.store.put('p', 'q', 'a', {}, ttl=100, age=97)
        self.store.put('p', 'q', 'b', {})
        self.assertEqual({'a', 'b'}, self.matched({}))
        self.clock.now += 3
        del self.store.queues[('p', 'q')]['a']       # Zaqar expired it
        self.assertEqual({'b'}, self.matched({}))

    def test_invalid_stored_policy_is_not_delivered_and_logged(self):
        self.store.put('p', 'q', 'bad', {'filter_policies': 'x'})
        self.store.put('p', 'q', 'good', {})
        with self.assertLogs(matcher_cache.LOG.logger, 'WARNING') as logs:
            entry = self.cache.get('p', 'q')
        self.assertEqual({'good'}, entry.matcher.match({}))
        self.assertNotIn('bad', entry.subscriptions)
        self.assertIn('Subscription bad of queue q (project p) is not '
                      'notified: its policy is invalid: filter_policies: '
                      "must be a list of tags, not 'x'", logs.output[0])

    def test_subscriptions_are_kept_as_delivery_reads_them(self):
        self.store.put('p', 'q', 'a', {'filter_policies': ['x'],
                                       'binding_keys': ['#'],
                                       'post_data': '"$zaqar_message$"',
                                       '_retry_policy': {'minimum_delay': 1}})
        self.assertEqual(
            {'id': 'a', 'source': 'q', 'subscriber': 'http://x/a',
             'confirmed': True, 'options': {
                 'post_data': '"$zaqar_message$"',
                 '_retry_policy': {'minimum_delay': 1}}},
            self.cache.get('p', 'q').subscriptions['a'])
        self.assertEqual('http', self.cache.get('p', 'q').schemes['a'])
