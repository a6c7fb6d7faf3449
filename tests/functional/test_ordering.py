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

"""Ordered queues on a real zaqar-filtering-server and redis."""

import random
import threading
import time

from oslo_config import cfg

from tests.functional import base
from tests.functional import test_retries
from zaqar_filtering import ordering
from zaqar_filtering import zaqar_storage

PATCH_TYPE = 'application/openstack-messaging-v2.0-json-patch'
ORDERING_PIPELINES = {
    'storage': {
        'message_pipeline': 'zaqar_filtering.notifier, '
                            'zaqar_filtering.ordering',
        'claim_pipeline': 'zaqar_filtering.ordering',
    },
}


def claim(client, queue, limit=10, ttl=60):
    """Claim up to ``limit`` messages; return (claim id, messages)."""
    response = client.post('/v2/queues/%s/claims' % queue,
                           params={'limit': limit},
                           json={'ttl': ttl, 'grace': 60})
    if response.status_code == 204:
        return None, []
    assert response.status_code == 201, (response.status_code,
                                         response.text)
    return (response.headers['Location'].rsplit('/', 1)[-1],
            response.json()['messages'])


def delete(client, queue, message, claim_id):
    response = client.delete(message['href'], params={'claim_id': claim_id})
    assert response.status_code == 204, (response.status_code,
                                         response.text)


def bodies(messages):
    return [message['body'] for message in messages]


class OrderedClaimsTest(base.ServerTestCase):

    CONF_OVERRIDES = ORDERING_PIPELINES

    def ordered_queue(self, **metadata):
        response = self.client.create_queue(
            self.queue, dict(metadata, _ordered_by_key=True))
        self.assertEqual(201, response.status_code, response.text)

    def post(self, messages):
        response = self.client.post_messages(self.queue, messages)
        self.assertEqual(201, response.status_code, response.text)

    def storage_claims(self):
        """Return the server's ordered claim controller, for any claim ttl.

        Zaqar's API claims for 60 s at least; its storage takes any ttl.
        """
        conf = cfg.ConfigOpts()
        conf(args=['--config-file', self.zaqar.conf_path], project='zaqar')
        return ordering.backend_for(zaqar_storage.data_driver(conf)).claims

    def test_only_the_oldest_message_of_a_key_is_claimable(self):
        self.ordered_queue()
        self.post([{'body': 'a1', 'ordering_key': 'a'},
                   {'body': 'b1', 'ordering_key': 'b'},
                   {'body': 'a2', 'ordering_key': 'a'},
                   {'body': 'b2', 'ordering_key': 'b'}])
        # Listing is unchanged: every message, blocked ones too.
        self.assertEqual(['a1', 'b1', 'a2', 'b2'],
                         bodies(self.client.messages(self.queue)))
        claim_id, messages = claim(self.client, self.queue)
        self.assertEqual(['a1', 'b1'], bodies(messages))
        self.assertEqual((None, []), claim(self.client, self.queue))
        delete(self.client, self.queue, messages[1], claim_id)
        _, messages = claim(self.client, self.queue)
        self.assertEqual(['b2'], bodies(messages))

    def test_a_released_claim_gives_the_same_message_again(self):
        self.ordered_queue()
        self.post([{'body': 1, 'ordering_key': 'k'},
                   {'body': 2, 'ordering_key': 'k'}])
        claim_id, messages = claim(self.client, self.queue)
        self.assertEqual([1], bodies(messages))
        response = self.client.delete('/v2/queues/%s/claims/%s'
                                      % (self.queue, claim_id))
        self.assertEqual(204, response.status_code)
        claim_id, messages = claim(self.client, self.queue)
        self.assertEqual([1], bodies(messages))
        delete(self.client, self.queue, messages[0], claim_id)
        _, messages = claim(self.client, self.queue)
        self.assertEqual([2], bodies(messages))

    def test_an_expired_claim_gives_the_same_message_again(self):
        self.ordered_queue()
        self.post([{'body': 1, 'ordering_key': 'k'},
                   {'body': 2, 'ordering_key': 'k'}])
        claims = self.storage_claims()
        _, messages = claims.create(self.queue, {'ttl': 1, 'grace': 0},
                                    project=self.client.project)
        self.assertEqual([1], bodies(messages))
        self.assertEqual((None, []), claim(self.client, self.queue))
        time.sleep(2.1)
        claim_id, messages = claim(self.client, self.queue)
        self.assertEqual([1], bodies(messages))
        delete(self.client, self.queue, messages[0], claim_id)
        self.assertEqual([2], bodies(claim(self.client, self.queue)[1]))

    def test_a_deleted_message_unblocks_its_key_even_unclaimed(self):
        self.ordered_queue()
        self.post([{'body': 1, 'ordering_key': 'k'},
                   {'body': 2, 'ordering_key': 'k'}])
        [first, _] = self.client.messages(self.queue)
        self.assertEqual(204, self.client.delete(first['href']).status_code)
        self.assertEqual([2], bodies(claim(self.client, self.queue)[1]))

    def test_unkeyed_messages_are_claimed_as_usual(self):
        self.ordered_queue()
        self.post([{'body': 'u1'}, {'body': 'k1', 'ordering_key': 'k'},
                   {'body': 'u2'}, {'body': 'k2', 'ordering_key': 'k'},
                   {'body': 'u3'}])
        _, messages = claim(self.client, self.queue, limit=2)
        self.assertEqual(['u1', 'k1'], bodies(messages))
        _, messages = claim(self.client, self.queue)
        self.assertEqual(['u2', 'u3'], bodies(messages))

    def test_messages_zaqar_posts_itself_are_claimed_after_earlier_ones(self):
        # A batch without a key goes to Zaqar as usual, after a claim has
        # filed the queue's unkeyed messages so far.
        self.ordered_queue()
        self.post([{'body': 'k1', 'ordering_key': 'k'},
                   {'body': 'k2', 'ordering_key': 'k'}])
        self.assertEqual(['k1'], bodies(claim(self.client, self.queue)[1]))
        self.post([{'body': 'u1'}])
        self.post([{'body': 'u2'}, {'body': 'j1', 'ordering_key': 'j'}])
        self.assertEqual(['u1', 'u2', 'j1'],
                         bodies(claim(self.client, self.queue)[1]))

    def test_a_dead_letter_is_claimed_from_an_ordered_queue(self):
        dead = self.queue + '-dead'
        self.assertEqual(201, self.client.create_queue(
            dead, {'_ordered_by_key': True}).status_code)
        self.ordered_queue(_max_claim_count=1, _dead_letter_queue=dead)
        self.post([{'body': 'k1', 'ordering_key': 'k'}])
        claims = self.storage_claims()
        # The second claim is one too many: k1 moves to the dead letter
        # queue, still claimed by it (for 1 s).
        for _ in range(2):
            claims.create(self.queue, {'ttl': 1, 'grace': 0},
                          project=self.client.project)
            time.sleep(2.1)
        self.assertEqual((None, []), claim(self.client, self.queue))
        self.assertEqual(['k1'], bodies(claim(self.client, dead)[1]))

    def test_a_delayed_message_counts_from_when_it_is_visible(self):
        # Zaqar keeps a message's delay only in a queue with a default one.
        self.ordered_queue(_default_message_delay=1)
        self.post([{'body': 'late', 'ordering_key': 'k', 'delay': 3}])
        self.post([{'body': 'now', 'ordering_key': 'k', 'delay': 0}])
        claim_id, messages = claim(self.client, self.queue)
        self.assertEqual(['now'], bodies(messages))
        delete(self.client, self.queue, messages[0], claim_id)
        self.assertEqual((None, []), claim(self.client, self.queue))
        time.sleep(3.1)
        self.assertEqual(['late'], bodies(claim(self.client, self.queue)[1]))

    def test_a_queue_becomes_ordered_by_patch(self):
        self.assertEqual(201, self.client.create_queue(self.queue)
                         .status_code)
        self.post([{'body': 1, 'ordering_key': 'k'},
                   {'body': 2, 'ordering_key': 'k'}])
        response = self.client.patch(
            '/v2/queues/%s' % self.queue, headers={'Content-Type': PATCH_TYPE},
            json=[{'op': 'add', 'path': '/metadata/_ordered_by_key',
                   'value': True}])
        self.assertEqual(200, response.status_code, response.text)
        self.assertIs(True, response.json()['_ordered_by_key'])
        self.assertEqual([1], bodies(claim(self.client, self.queue)[1]))

    def test_keys_do_not_order_a_plain_queue(self):
        self.post([{'body': 1, 'ordering_key': 'k'},
                   {'body': 2, 'ordering_key': 'k'}])
        self.assertEqual([1, 2], bodies(claim(self.client, self.queue)[1]))

    def test_a_flag_that_is_not_a_boolean_is_refused(self):
        response = self.client.create_queue(self.queue,
                                            {'_ordered_by_key': 'yes'})
        self.assertEqual(400, response.status_code)
        self.assertIn("_ordered_by_key: must be true or false, not 'yes'",
                      response.json()['description'])
        self.assertNotIn('_ordered_by_key', self.client.get(
            '/v2/queues/%s' % self.queue).json())
        self.assertEqual(201, self.client.create_queue(self.queue)
                         .status_code)
        response = self.client.patch(
            '/v2/queues/%s' % self.queue, headers={'Content-Type': PATCH_TYPE},
            json=[{'op': 'add', 'path': '/metadata/_ordered_by_key',
                   'value': 1}])
        self.assertEqual(400, response.status_code)
        self.assertIn('_ordered_by_key: must be true or false, not 1',
                      response.json()['description'])
        self.assertNotIn('_ordered_by_key', self.client.get(
            '/v2/queues/%s' % self.queue).json())

    def test_a_bad_key_refuses_the_whole_batch(self):
        self.ordered_queue()
        for key, text in (('', 'is empty; an ordering key has 1 to 128 '
                           'characters'),
                          ('k' * 129, "'%s...' has 129 characters; the limit "
                           'is 128' % ('k' * 40)),
                          (5, 'must be a string, not 5'),
                          ('a\tb', "'a\\tb' contains the control character "
                           'U+0009')):
            with self.subTest(key=key):
                response = self.client.post_messages(
                    self.queue, [{'body': 1, 'ordering_key': 'ok'},
                                 {'body': 2, 'ordering_key': key}])
                self.assertEqual(400, response.status_code)
                self.assertIn('messages[1]: ordering_key: ' + text,
                              response.json()['description'])
        self.assertEqual([], self.client.messages(self.queue))


class ConcurrentConsumersTest(base.ServerTestCase):
    """4 consumers on 2 server processes sharing one redis."""

    CONF_OVERRIDES = ORDERING_PIPELINES
    KEYS = 10
    PER_KEY = 20

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.other = cls.start_zaqar(ORDERING_PIPELINES, name='zaqar2')

    def test_each_key_is_processed_in_order_and_once(self):
        self.assertEqual(201, self.client.create_queue(
            self.queue, {'_ordered_by_key': True}).status_code)
        posted = [{'body': {'key': 'k%d' % key, 'seq': seq},
                   'ordering_key': 'k%d' % key}
                  for seq in range(self.PER_KEY) for key in range(self.KEYS)]
        for start in range(0, len(posted), 10):
            response = self.client.post_messages(self.queue,
                                                 posted[start:start + 10])
            self.assertEqual(201, response.status_code, response.text)
        processed = {}
        in_flight = set()
        overlaps = []
        lock = threading.Lock()
        errors = []
        deadline = time.monotonic() + 120

        def consume(url, seed):
            rand = random.Random(seed)
            client = base.Client(url, project=self.client.project)
            try:
                while time.monotonic() < deadline:
                    with lock:
                        if sum(map(len, processed.values())) == len(posted):
                            return
                    claim_id, messages = claim(client, self.queue,
                                               limit=rand.randint(1, 4))
                    if not messages:
                        time.sleep(0.01)
                        continue
                    for message in messages:
                        body = message['body']
                        with lock:
                            if body['key'] in in_flight:
                                overlaps.append(body)
                            in_flight.add(body['key'])
                        time.sleep(rand.uniform(0, 0.02))
                        with lock:
                            processed.setdefault(body['key'], []).append(
                                body['seq'])
                            in_flight.discard(body['key'])
                        delete(client, self.queue, message, claim_id)
            except Exception as exc:  # reported by the test thread
                errors.append(exc)
            finally:
                client.close()

        urls = [self.zaqar.url, self.other.url] * 2
        threads = [threading.Thread(target=consume, args=(url, seed))
                   for seed, url in enumerate(urls)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual([], errors)
        self.assertEqual([], overlaps)
        self.assertEqual({'k%d' % key: list(range(self.PER_KEY))
                          for key in range(self.KEYS)}, processed)


class StockPipelinesTest(base.ServerTestCase):
    """A server without the ordering stage refuses ordered queues."""

    def test_the_flag_names_the_missing_configuration(self):
        response = self.client.create_queue(self.queue,
                                            {'_ordered_by_key': True})
        self.assertEqual(400, response.status_code)
        self.assertIn('_ordered_by_key: this server does not order claims: '
                      '[storage] message_pipeline and claim_pipeline must '
                      'both list zaqar_filtering.ordering',
                      response.json()['description'])
        self.assertEqual(201, self.client.create_queue(
            self.queue, {'_ordered_by_key': False}).status_code)


def _push_overrides():
    found = test_retries.overrides(**{
        'filtering:delivery': {'backoff_retries': '100', 'processes': '2'}})
    found['storage'].update(ORDERING_PIPELINES['storage'])
    return found


def _names(requests):
    return [r.json['body']['n'] for r in sorted(requests,
                                                key=lambda r: r.time)]


def _squeezed(names):
    """``names`` without repeats of the one before (retried attempts)."""
    return [n for i, n in enumerate(names) if not i or names[i - 1] != n]


class PushOrderingTest(test_retries.RetryTestCase):
    """Push of an ordered queue, through two delivery processes."""

    CONF_OVERRIDES = _push_overrides()
    # Zaqar's own schedule, 1 s apart, long enough to outlast the outage.
    ZAQAR_POLICY = {'retries_with_no_delay': 0, 'minimum_delay': 1,
                    'minimum_delay_retries': 60, 'maximum_delay': 11}

    def post_keyed(self, *pairs, queue=None):
        response = self.client.post_messages(queue or self.queue, [
            dict({'body': {'n': name}, 'ttl': 3600},
                 **({'ordering_key': key} if key else {}))
            for name, key in pairs])
        self.assertEqual(201, response.status_code, response.text)

    def test_a_failing_key_delays_only_that_key(self):
        response = self.client.create_queue(self.queue,
                                            {'_ordered_by_key': True})
        self.assertEqual(201, response.status_code, response.text)
        strategies = {
            'decay': None,
            'zaqar': {'_retry_policy': self.ZAQAR_POLICY},
            'backoff': test_retries.BACKOFF}
        for name, options in strategies.items():
            self.subscribe('%s/%s' % (self.queue, name), options)
        self.receiver.fail(self.queue, status=500,
                           when=lambda doc: (doc or {}).get(
                               'ordering_key') == 'K')
        self.post_keyed(('K1', 'K'), ('A1', 'A'), ('U1', None), ('K2', 'K'),
                        ('A2', 'A'))
        # K1's retry fails too: exponential_decay (the default) would now
        # block the subscription for a message without a key, and backoff
        # holds a subscription's later messages without a key.
        for name in strategies:
            self.receiver.wait_for(3, '%s/%s' % (self.queue, name),
                                   status=500)
        self.post_keyed(('K3', 'K'), ('U2', None), ('A3', 'A'))
        # The other key and the messages without a key arrive meanwhile.
        for name in strategies:
            names = _names(self.receiver.wait_for(
                5, '%s/%s' % (self.queue, name), status=200))
            self.assertEqual(['A1', 'A2', 'A3'],
                             [n for n in names if n.startswith('A')], name)
            self.assertEqual(['U1', 'U2'],
                             [n for n in names if n.startswith('U')], name)
        # While K1 fails, no later message of K is tried.
        self.assertEqual({'K1'}, set(_names(self.receiver.requests(
            self.queue, status=500))))
        self.receiver.recover(self.queue)
        for name in strategies:
            path = '%s/%s' % (self.queue, name)
            ok = self.delivered_once(path, 8)
            names = _names(self.receiver.requests(path))
            self.assertEqual(['K1', 'K2', 'K3'], _squeezed(
                [n for n in names if n.startswith('K')]), name)
            self.assertEqual(['K1', 'K2', 'K3'],
                             [n for n in _names(ok) if n.startswith('K')],
                             name)
            self.assertEqual(['U1', 'U2'], sorted(
                n for n in _names(ok) if n.startswith('U')), name)

    def test_keys_of_a_queue_that_is_not_ordered_do_not_wait(self):
        path = self.queue + '/plain'
        self.subscribe(path)
        self.receiver.fail(path, status=500,
                           when=lambda doc: doc['body']['n'] == 'K1')
        self.post_keyed(('K1', 'K'), ('K2', 'K'))
        self.assertEqual(['K2'], _names(self.receiver.wait_for(
            1, path, status=200)))
