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

from oslo_config import cfg
from zaqar.conf import default as zaqar_default
from zaqar.conf import drivers as zaqar_drivers
from zaqar.storage import errors as storage_errors

from tests.unit.store import fixtures
from zaqar_filtering import DEFAULT_LIMITS
from zaqar_filtering.stages import matcher_cache
from zaqar_filtering.store.embedded import SubscriptionsStore
from zaqar_filtering.store import versions
from zaqar_filtering import zaqar_storage


class FakeSubscriptions:
    """Zaqar's subscription controller protocol, in memory.

    ``list`` returns a generator that yields one page, then the marker of
    the next page (None at the end).
    """

    def __init__(self):
        self.queues = {}
        self.list_calls = 0
        self.get_calls = 0
        self.created = 0

    def get(self, queue, subscription_id, project=None):
        self.get_calls += 1
        try:
            return dict(self.queues[project, queue][subscription_id])
        except KeyError:
            raise storage_errors.SubscriptionDoesNotExist(subscription_id)

    def create(self, queue, subscriber, ttl, options, project=None):
        if any(sub['subscriber'] == subscriber
               for sub in self.queues.get((project, queue), {}).values()):
            return None
        self.created += 1
        sub_id = 'new%d' % self.created
        self.put(project, queue, sub_id, options, ttl=ttl)
        self.queues[project, queue][sub_id]['subscriber'] = subscriber
        return sub_id

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


class InlineExecutor:
    """Runs background rebuilds at once, so tests see their result."""

    def submit(self, function, *args):
        function(*args)


class SwitchableStore:
    """A real store that tests can make unreachable, and bring back."""

    def __init__(self, store):
        self.up = store
        self.down = fixtures.unreachable_store()
        self.name = store.name
        self.reachable = True

    def version(self, project, queue):
        store = self.up if self.reachable else self.down
        return store.version(project, queue)

    def changes(self, project, queue, since):
        store = self.up if self.reachable else self.down
        return store.changes(project, queue, since)


def versionless_store():
    """The embedded store of a deployment with no shared version place."""
    conf = cfg.ConfigOpts()
    zaqar_default.register_opts(conf)
    zaqar_drivers.register_opts(conf)
    conf([], default_config_files=[], default_config_dirs=[])
    conf.set_override('message_store', 'swift', 'drivers')
    return SubscriptionsStore(conf)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class CacheTestCase(unittest.TestCase):

    def setUp(self):
        self.subscriptions = FakeSubscriptions()
        self.clock = Clock()
        self.store = self.make_store()
        self.cache = self.make_cache()

    def make_store(self):
        return fixtures.mongomock_store()

    def make_cache(self, max_age=10):
        return matcher_cache.MatcherCache(
            self.subscriptions, DEFAULT_LIMITS, max_age=max_age,
            store=self.store, clock=self.clock, executor=InlineExecutor())

    def matched(self, message, project='p', queue='q', cache=None):
        entry = (cache or self.cache).get(project, queue)
        return entry.matcher.match(message)

    def change(self, project, queue, sub_id, options, land=True):
        """Change a subscription as a server process would.

        :param options: None deletes it.
        """
        started = self.store.change_started(project, queue,
                                            [{'id': sub_id}])
        if options is None:
            del self.subscriptions.queues[project, queue][sub_id]
        else:
            self.subscriptions.put(project, queue, sub_id, options)
        if land:
            self.store.changes_landed(project, queue, started)
        return started


class TestMatcherCache(CacheTestCase):

    def test_built_once_then_reused(self):
        self.subscriptions.put('p', 'q', 'a', {'filter_policies': ['x']})
        self.assertEqual({'a'}, self.matched({'filter_policies': ['x']}))
        self.assertEqual({'a'}, self.matched({'filter_policies': ['x']}))
        self.assertEqual(1, self.subscriptions.list_calls)

    def test_lists_every_page(self):
        for number in range(zaqar_storage.PAGE_SIZE * 2 + 5):
            self.subscriptions.put('p', 'q', '%05d' % number, {})
        self.assertEqual(zaqar_storage.PAGE_SIZE * 2 + 5,
                         len(self.matched({})))

    def test_a_change_through_another_process_applies_to_the_next_post(self):
        other = self.make_cache()
        self.subscriptions.put('p', 'q', 'a', {'filter_policies': ['x']})
        self.subscriptions.put('p', 'q', 'b', {'filter_policies': ['x']})
        self.assertEqual({'a', 'b'}, self.matched({'filter_policies': ['x']}))
        self.assertEqual({'a', 'b'}, self.matched({'filter_policies': ['x']},
                                                  cache=other))
        self.change('p', 'q', 'a', {'filter_policies': ['y']})
        self.change('p', 'q', 'b', None)
        self.change('p', 'q', 'c', {'filter_policies': ['x']})
        for cache in (self.cache, other):
            self.assertEqual({'c'}, self.matched({'filter_policies': ['x']},
                                                 cache=cache))
            self.assertEqual({'a'}, self.matched({'filter_policies': ['y']},
                                                 cache=cache))
        # Only the changed subscriptions were read, once in each process.
        self.assertEqual(2, self.subscriptions.list_calls)
        self.assertEqual(6, self.subscriptions.get_calls)

    def test_a_change_in_flight_is_read_again_until_it_lands(self):
        self.subscriptions.put('p', 'q', 'a', {'filter_policies': ['x']})
        self.matched({})
        # Zaqar writes after the stage: the first post may come before.
        started = self.store.change_started('p', 'q', [{'id': 'a'}])
        self.assertEqual({'a'}, self.matched({'filter_policies': ['x']}))
        self.subscriptions.put('p', 'q', 'a', {'filter_policies': ['y']})
        self.assertEqual({'a'}, self.matched({'filter_policies': ['y']}))
        self.assertEqual(2, self.subscriptions.get_calls)
        self.store.changes_landed('p', 'q', started)
        self.matched({})
        self.matched({})
        self.assertEqual(3, self.subscriptions.get_calls)
        self.assertEqual(1, self.subscriptions.list_calls)

    def test_a_change_of_unknown_subscriptions_rebuilds(self):
        self.subscriptions.put('p', 'q', 'a', {})
        self.matched({})
        self.subscriptions.put('p', 'q', 'b', {})
        self.store.changes_landed('p', 'q', self.store.change_started(
            'p', 'q'))
        self.assertEqual({'a', 'b'}, self.matched({}))
        self.assertEqual(2, self.subscriptions.list_calls)

    def test_a_change_no_longer_logged_rebuilds(self):
        self.subscriptions.put('p', 'q', 'a', {})
        self.matched({})
        for _ in range(versions.LOG_LENGTH + 1):
            self.change('p', 'q', 'b', {})
        self.assertEqual({'a', 'b'}, self.matched({}))
        self.assertEqual(2, self.subscriptions.list_calls)
        self.assertEqual(0, self.subscriptions.get_calls)

    def test_a_change_that_never_lands_counts_as_landed_after_the_limit(
            self):
        self.subscriptions.put('p', 'q', 'a', {})
        self.change('p', 'q', 'a', {}, land=False)
        self.matched({})
        self.clock.now += matcher_cache.IN_FLIGHT_LIMIT_SECONDS
        with self.assertLogs(matcher_cache.LOG.logger, 'WARNING') as logs:
            self.matched({})
        self.assertIn('has not landed after 30 s', logs.output[0])
        self.matched({})    # read once more after the background listing
        calls = self.subscriptions.get_calls
        self.matched({})
        self.matched({})
        self.assertEqual(calls, self.subscriptions.get_calls)

    def test_other_queues_and_projects_keep_their_entry(self):
        self.subscriptions.put('p', 'q', 'a', {})
        self.subscriptions.put('other', 'q', 'b', {})
        self.assertEqual({'a'}, self.matched({}))
        self.assertEqual({'b'}, self.matched({}, project='other'))
        self.change('other', 'q', 'b', {'filter_policies': ['t']})
        self.assertEqual({'a'}, self.matched({}))
        self.assertEqual(0, self.subscriptions.get_calls)
        self.assertEqual(set(), self.matched({}, project='other'))
        self.assertEqual(1, self.subscriptions.get_calls)

    def test_the_background_listing_keeps_what_did_not_change(self):
        self.subscriptions.put('p', 'q', 'a', {})
        self.subscriptions.put('p', 'q', 'b', {})
        entry = self.cache.get('p', 'q')
        made = []
        plan = entry.plan('k', lambda: made.append(1) or 'plan')
        self.clock.now += matcher_cache.LOGGED_LISTING_SECONDS
        self.matched({})            # listed again: nothing changed
        self.assertIs(entry, self.cache.get('p', 'q'))
        self.assertEqual(plan, entry.plan('k', lambda: made.append(1)))
        self.assertEqual([1], made)
        del self.subscriptions.queues[('p', 'q')]['b']
        self.clock.now += matcher_cache.LOGGED_LISTING_SECONDS
        self.matched({})
        self.assertEqual({'a'}, self.matched({}))
        self.assertEqual('again', entry.plan('k', lambda: 'again'))

    def test_a_change_during_the_background_listing_is_read_again(self):
        self.subscriptions.put('p', 'q', 'a', {})
        self.matched({})
        listing = self.subscriptions.list

        def list_then_change(*args, **kwargs):
            # The listing misses b, created meanwhile, which a post
            # reads before the listing is applied.
            pages = listing(*args, **kwargs)
            yield next(pages)
            self.change('p', 'q', 'b', {})
            self.assertEqual({'a', 'b'}, self.matched({}))
            yield next(pages)
        self.subscriptions.list = list_then_change
        self.clock.now += matcher_cache.LOGGED_LISTING_SECONDS
        self.matched({})
        self.subscriptions.list = listing
        self.assertEqual({'a', 'b'}, self.matched({}))

    def test_listed_again_in_the_background(self):
        self.subscriptions.put('p', 'q', 'a', {})
        self.matched({})
        # A change that bypassed the stages, e.g. an old server process.
        self.subscriptions.put('p', 'q', 'b', {})
        self.clock.now += matcher_cache.LOGGED_LISTING_SECONDS - 0.1
        self.assertEqual({'a'}, self.matched({}))
        self.clock.now += 0.1
        self.matched({})            # served from the cache, rebuilt after
        self.assertEqual(2, self.subscriptions.list_calls)
        self.assertEqual({'a', 'b'}, self.matched({}))
        self.assertEqual(2, self.subscriptions.list_calls)

    def test_store_outage_lists_every_post_and_warns_once(self):
        self.store = SwitchableStore(self.store)
        self.cache = self.make_cache()
        self.subscriptions.put('p', 'q', 'a', {'filter_policies': ['x']})
        self.matched({})
        self.store.reachable = False
        with self.assertLogs(matcher_cache.LOG.logger, 'WARNING') as logs:
            # A change made just before the outage is obeyed all the same.
            self.subscriptions.put('p', 'q', 'a', {'filter_policies': ['y']})
            for _ in range(3):
                self.assertEqual(set(), self.matched({'filter_policies':
                                                      ['x']}))
            self.store.reachable = True
            self.assertEqual({'a'}, self.matched({'filter_policies': ['y']}))
        self.assertEqual(2, len(logs.output))
        self.assertIn('policy store mongodb is unavailable', logs.output[0])
        self.assertIn('every post lists its queue', logs.output[0])
        self.assertIn('The policy store mongodb is back', logs.output[1])
        self.assertEqual(5, self.subscriptions.list_calls)

    def test_rebuilt_when_a_subscription_expires(self):
        self.subscriptions.put('p', 'q', 'a', {}, ttl=100, age=97)
        self.subscriptions.put('p', 'q', 'b', {})
        self.assertEqual({'a', 'b'}, self.matched({}))
        self.clock.now += 3
        del self.subscriptions.queues[('p', 'q')]['a']       # Zaqar expired it
        self.assertEqual({'b'}, self.matched({}))

    def test_invalid_stored_policy_is_not_delivered_and_logged(self):
        self.subscriptions.put('p', 'q', 'bad', {'filter_policies': 'x'})
        self.subscriptions.put('p', 'q', 'good', {})
        with self.assertLogs(matcher_cache.LOG.logger, 'WARNING') as logs:
            entry = self.cache.get('p', 'q')
        self.assertEqual({'good'}, entry.matcher.match({}))
        self.assertNotIn('bad', entry.subscriptions)
        self.assertIn('Subscription bad of queue q (project p) is not '
                      'notified: its policy is invalid: filter_policies: '
                      "must be a list of tags, not 'x'", logs.output[0])

    def test_subscriptions_are_kept_as_delivery_reads_them(self):
        self.subscriptions.put('p', 'q', 'a', {
            'filter_policies': ['x'], 'binding_keys': ['#'],
            'post_data': '"$zaqar_message$"',
            '_retry_policy': {'minimum_delay': 1}})
        self.assertEqual(
            {'id': 'a', 'source': 'q', 'subscriber': 'http://x/a',
             'confirmed': True, 'options': {
                 'post_data': '"$zaqar_message$"',
                 '_retry_policy': {'minimum_delay': 1}}},
            self.cache.get('p', 'q').subscriptions['a'])
        self.assertEqual('http', self.cache.get('p', 'q').schemes['a'])


class TestWithoutSharedVersion(CacheTestCase):
    """Stores with no shared version: local changes and max_age."""

    def make_store(self):
        return versionless_store()

    def test_a_local_change_applies_to_the_next_post(self):
        self.subscriptions.put('p', 'q', 'a', {'filter_policies': ['x']})
        self.assertEqual({'a'}, self.matched({'filter_policies': ['x']}))
        matcher_cache.invalidate('p', 'q')
        self.subscriptions.put('p', 'q', 'a', {'filter_policies': ['y']})
        self.assertEqual(set(), self.matched({'filter_policies': ['x']}))
        # While the change settles, every post lists again ...
        self.matched({})
        self.assertEqual(3, self.subscriptions.list_calls)
        # ... and afterwards the matcher is cached again.
        self.clock.now += matcher_cache.SETTLING_SECONDS
        self.matched({})
        self.matched({})
        self.assertEqual(4, self.subscriptions.list_calls)

    def test_other_changes_apply_after_max_age(self):
        self.subscriptions.put('p', 'q', 'a', {})
        self.matched({})
        self.subscriptions.put('p', 'q', 'b', {})
        self.clock.now += 10
        self.matched({})
        self.assertEqual({'a', 'b'}, self.matched({}))
