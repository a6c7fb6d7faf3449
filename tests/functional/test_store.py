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

"""The policy store with real servers.

- Two zaqar-filtering-server processes share one redis: a change made
  through one applies to the next post through the other (the embedded
  store keeps the queue versions in Zaqar's redis).
- With the mongodb store unreachable, a server keeps delivering by the
  subscriptions' own policies, warns once, and refuses changes with a 503
  that says why, with Retry-After.
- The mongodb store (over mongomock) synced from Zaqar's real redis store
  by the stage's syncer and by zaqar-filtering-manage.
"""

import datetime
import io
import os
import subprocess
import time

from oslo_config import cfg

from tests.functional import base
from tests.functional.test_notifier import FILTERING
from tests.unit.store import fixtures
from zaqar_filtering.cmd import manage
from zaqar_filtering import DEFAULT_LIMITS
from zaqar_filtering.stages import store_sync
from zaqar_filtering.store.embedded import SubscriptionsStore
from zaqar_filtering.store.versions import Version
from zaqar_filtering import zaqar_storage

GRACE = 0.5


class DeliveryTestCase(base.ServerTestCase):

    CONF_OVERRIDES = FILTERING

    def subscribe(self, client, name, options):
        response = client.subscribe(
            self.queue, self.receiver.url('%s/%s' % (self.queue, name)),
            options)
        self.assertEqual(201, response.status_code, response.text)
        return response.json()['subscription_id']

    def received(self, name):
        """The bodies a subscriber received, sorted: deliveries overlap."""
        return sorted(r.json['body'] for r in self.receiver.requests(
            '%s/%s' % (self.queue, name)))

    def post(self, client, body, tags):
        response = client.post_messages(
            self.queue, [{'ttl': 60, 'body': body, 'filter_policies': tags}])
        self.assertEqual(201, response.status_code, response.text)


class TestTwoServers(DeliveryTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.other = cls.start_zaqar(FILTERING, name='zaqar-other')

    def setUp(self):
        super().setUp()
        self.first = self.client
        self.second = base.Client(self.other.url)
        self.addCleanup(self.second.close)
        self.assertEqual(201, self.first.create_queue(self.queue).status_code)

    def test_an_update_through_one_applies_to_the_next_post_of_the_other(self):
        sub_id = self.subscribe(self.first, 'a', {'filter_policies': ['x']})
        # The second server caches the queue's matcher.
        self.post(self.second, 1, ['x'])
        self.post(self.second, 2, ['y'])
        self.receiver.wait_for(1, '%s/a' % self.queue)
        response = self.first.patch(
            '/v2/queues/%s/subscriptions/%s' % (self.queue, sub_id),
            json={'options': {'filter_policies': ['y']}})
        self.assertEqual(204, response.status_code, response.text)
        self.post(self.second, 3, ['x'])
        self.post(self.second, 4, ['y'])
        self.receiver.wait_for(2, '%s/a' % self.queue)
        time.sleep(GRACE)
        self.assertEqual([1, 4], self.received('a'))

    def test_a_delete_through_one_applies_to_the_next_post_of_the_other(self):
        sub_id = self.subscribe(self.first, 'a', {})
        self.subscribe(self.first, 'b', {})
        self.post(self.second, 1, ['x'])
        self.receiver.wait_for(1, '%s/a' % self.queue)
        response = self.first.delete(
            '/v2/queues/%s/subscriptions/%s' % (self.queue, sub_id))
        self.assertEqual(204, response.status_code, response.text)
        self.post(self.second, 2, ['x'])
        self.receiver.wait_for(2, '%s/b' % self.queue)
        time.sleep(GRACE)
        self.assertEqual([1], self.received('a'))
        self.assertEqual([1, 2], self.received('b'))

    def test_projects_with_the_same_queue_name_stay_apart(self):
        other_project = base.Client(self.other.url, project='other-project')
        self.addCleanup(other_project.close)
        self.assertEqual(201, other_project.create_queue(
            self.queue).status_code)
        self.subscribe(self.first, 'mine', {'filter_policies': ['x']})
        self.subscribe(other_project, 'theirs', {'filter_policies': ['y']})
        for client in (self.first, self.second, other_project):
            self.post(client, 'x', ['x'])
            self.post(client, 'y', ['y'])
        self.receiver.wait_for(2, '%s/mine' % self.queue)
        self.receiver.wait_for(1, '%s/theirs' % self.queue)
        time.sleep(GRACE)
        self.assertEqual(['x', 'x'], self.received('mine'))
        self.assertEqual(['y'], self.received('theirs'))

    def test_versions_live_in_zaqars_redis(self):
        self.subscribe(self.first, 'a', {})
        store = SubscriptionsStore(self.zaqar_conf())
        base.wait_until(lambda: store.version('zaqar-filtering-tests',
                                              self.queue).landed >= 2)
        version = store.version('zaqar-filtering-tests', self.queue)
        self.assertEqual(version.started, version.landed)
        self.assertEqual(Version(0, 0), store.version('other-project',
                                                      self.queue))

    def zaqar_conf(self):
        conf = cfg.ConfigOpts()
        conf(['--config-file', self.zaqar.conf_path], project='zaqar')
        zaqar_storage.load(conf)        # registers Zaqar's options
        return conf


class TestStoreDown(DeliveryTestCase):
    """policy_store = mongodb, with nothing listening at its URI."""

    CONF_OVERRIDES = {
        **FILTERING,
        'filtering': {'policy_store': 'mongodb'},
        'filtering:mongodb': {
            'uri': 'mongodb://127.0.0.1:%d/' % base.free_port(),
            'server_selection_timeout_seconds': '0.2',
            'connect_timeout_seconds': '0.2'},
    }

    def test_delivers_by_the_subscriptions_own_policies(self):
        self.assertEqual(201, self.client.create_queue(self.queue).status_code)
        project = 'zaqar-filtering-tests'
        self.redis.seed_subscriptions(project, self.queue, [
            (self.receiver.url('%s/x' % self.queue),
             {'filter_policies': ['x']}),
            (self.receiver.url('%s/all' % self.queue), {})])
        for number in range(5):
            self.post(self.client, number, ['x' if number % 2 else 'y'])
        self.receiver.wait_for(5, '%s/all' % self.queue)
        self.receiver.wait_for(2, '%s/x' % self.queue)
        time.sleep(GRACE)
        self.assertEqual([1, 3], self.received('x'))
        self.assertEqual([0, 1, 2, 3, 4], self.received('all'))
        with open(self.zaqar.log_path) as log:
            warnings = [line for line in log
                        if 'policy store mongodb is unavailable' in line
                        and 'every post lists' in line]
        self.assertEqual(1, len(warnings), warnings)

    def assert_refused(self, response, action):
        self.assertEqual(503, response.status_code, response.text)
        self.assertEqual(
            {'title': 'Service temporarily unavailable',
             'description': 'The subscription was not %s: the policy store '
                            'that keeps filter policies is unavailable. '
                            'Retry in 5 seconds.' % action},
            response.json())
        self.assertEqual('5', response.headers['Retry-After'])

    def test_changes_are_refused_with_503(self):
        self.assertEqual(201, self.client.create_queue(self.queue).status_code)
        self.assert_refused(self.client.subscribe(
            self.queue, self.receiver.url('refused'), {}), 'created')
        response = self.client.get('/v2/queues/%s/subscriptions'
                                   % self.queue)
        self.assertEqual([], response.json()['subscriptions'])

        # One from before the outage: updates (stock Zaqar answers 400),
        # confirmations and deletions are refused alike, and it stays.
        self.redis.seed_subscriptions('zaqar-filtering-tests', self.queue, [
            (self.receiver.url('%s/old' % self.queue), {})])
        [subscription] = self.client.get(
            '/v2/queues/%s/subscriptions' % self.queue).json()[
                'subscriptions']
        path = '/v2/queues/%s/subscriptions/%s' % (
            self.queue, subscription['id'])
        self.assert_refused(self.client.patch(path, json={'options': {
            'filter_policies': ['x']}}), 'updated')
        self.assert_refused(self.client.put(path + '/confirm', json={
            'confirmed': True}), 'confirmed')
        self.assert_refused(self.client.delete(path), 'deleted')
        found = self.client.get(path).json()
        del subscription['age'], found['age']
        self.assertEqual(subscription, found)

        # Errors that are not the store's are Zaqar's own.
        response = self.client.subscribe(self.queue, 'nope://x', {})
        self.assertEqual(400, response.status_code, response.text)

    def test_the_dry_run_needs_no_store(self):
        self.redis.seed_subscriptions('zaqar-filtering-tests', self.queue, [
            (self.receiver.url('%s/x' % self.queue),
             {'filter_policies': ['x']})])
        response = self.client.post(
            '/v2/queues/%s/subscriptions/match' % self.queue,
            json={'message': {'body': 1, 'filter_policies': ['y']}})
        self.assertEqual(200, response.status_code, response.text)
        [entry] = response.json()['not_matched']
        self.assertEqual("filter_policies: the message's tags [y] share none "
                         "of [x]", entry['reason'])


class TestMongoStoreSync(base.ServerTestCase):
    """The mongodb store, synced from Zaqar's real redis subscriptions."""

    CONF_OVERRIDES = FILTERING
    PROJECT = 'zaqar-filtering-tests'

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        self.conf(['--config-file', self.zaqar.conf_path], project='zaqar')
        self.drivers = zaqar_storage.load(self.conf)
        self.store = fixtures.mongomock_store()
        self.assertEqual(201, self.client.create_queue(self.queue).status_code)

    def subscribe(self, name, options, ttl=3600):
        response = self.client.subscribe(
            self.queue, self.receiver.url(name), options, ttl=ttl)
        self.assertEqual(201, response.status_code, response.text)
        return response.json()['subscription_id']

    def test_syncer_copies_creates_updates_deletes_and_expiry(self):
        syncer = store_sync.StoreSyncer(
            self.store, self.conf, DEFAULT_LIMITS,
            controller=self.drivers.data.subscription_controller,
            delays=(0.05,))

        def synced():
            syncer.changed(self.PROJECT, self.queue,
                           self.store.change_started(self.PROJECT,
                                                     self.queue))
            base.wait_until(lambda: self.store.version(
                self.PROJECT, self.queue).landed
                == self.store.version(self.PROJECT, self.queue).started)
            return self.store.load(self.PROJECT, self.queue)

        a = self.subscribe('a', {'filter_policies': ['b', 'a']})
        b = self.subscribe('b', {'binding_keys': ['x.#']}, ttl=60)
        records = synced()
        self.assertEqual({a, b}, set(records))
        self.assertEqual({'filter_policies': ['a', 'b']}, records[a].policy)
        self.assertEqual(('binding_keys',), records[b].kinds)
        expires = datetime.datetime.now(datetime.timezone.utc) + \
            datetime.timedelta(seconds=60)
        self.assertLess(abs((records[b].expires - expires).total_seconds()),
                        3)
        self.client.patch('/v2/queues/%s/subscriptions/%s'
                          % (self.queue, a),
                          json={'options': {'filter_policies': ['c']}})
        self.assertEqual({'filter_policies': ['c']}, synced()[a].policy)
        self.client.delete('/v2/queues/%s/subscriptions/%s'
                           % (self.queue, a))
        self.assertEqual({b}, set(synced()))

    def test_manage_sync_and_verify(self):
        a = self.subscribe('a', {'filter_policies': ['t']})
        self.redis.seed_subscriptions(self.PROJECT, self.queue, [
            (self.receiver.url('bad'), {'filter_policies': 'not a list'})])
        out = io.StringIO()
        self.assertEqual(1, self.manage('verify', out))
        self.assertIn('missing project=%s queue=%s subscription=%s'
                      % (self.PROJECT, self.queue, a), out.getvalue())
        self.assertIn("invalid project=%s queue=%s" % (self.PROJECT,
                                                       self.queue),
                      out.getvalue())
        # The invalid subscription still needs attention after a sync.
        out = io.StringIO()
        self.assertEqual(1, self.manage('sync', out))
        self.assertIn('1 written, 0 unchanged, 0 deleted, 1 invalid',
                      out.getvalue())
        self.assertEqual({a}, set(self.store.load(self.PROJECT, self.queue)))
        out = io.StringIO()
        self.assertEqual(1, self.manage('sync', out))
        self.assertIn('0 written, 1 unchanged, 0 deleted, 1 invalid',
                      out.getvalue())
        out = io.StringIO()
        self.assertEqual(1, self.manage('verify', out))
        self.assertIn('2 subscriptions checked: 1 invalid, 0 missing, '
                      '0 stale, 0 orphaned', out.getvalue())

    def manage(self, command, out):
        """Run a command of zaqar-filtering-manage on the mongomock store."""
        conf = cfg.ConfigOpts()
        conf.register_cli_opt(manage.COMMAND)
        conf(['--config-file', self.zaqar.conf_path, command,
              '--project', self.PROJECT, '--queue', self.queue],
             project='zaqar')
        return conf.command.run(conf, self.store, self.drivers,
                                DEFAULT_LIMITS, out)

    def test_manage_console_script_with_the_embedded_store(self):
        self.subscribe('a', {})
        result = subprocess.run(
            [base.venv_script('zaqar-filtering-manage'), '--config-file',
             self.zaqar.conf_path, 'sync', '--all'],
            capture_output=True, text=True, timeout=60,
            env=dict(os.environ))
        self.assertEqual(0, result.returncode, result.stderr)
        self.assertIn(self.queue, result.stdout)
        self.assertIn('keeps no copy of the policies', result.stdout)
        result = subprocess.run(
            [base.venv_script('zaqar-filtering-manage'), '--config-file',
             self.zaqar.conf_path, 'sync'],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(2, result.returncode)
        self.assertIn('give either --all or --project', result.stderr)
