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

"""Topics and ``queue:`` subscribers against a real zaqar-filtering-server.

A topic fans its messages out to webhooks and to queues of the same
project, each subscription with its own policy; queues get exactly the
matching messages (claimed through the API), the topic keeps none, a
missing target queue is a retried, visible failure, and projects stay
apart.
"""

import shutil
import tempfile
import unittest
import uuid

import redis

from tests.functional import base
from tests.functional import test_retries
from tests.unit import test_topic_store
from zaqar_filtering import topic_store

BACKOFF = test_retries.BACKOFF


class TopicTestCase(base.ServerTestCase):
    CONF_OVERRIDES = test_retries.overrides()

    def setUp(self):
        super().setUp()
        self.topic = 't' + self.queue[1:]

    def name(self, suffix):
        return '%s-%s' % (self.queue[:50], suffix)

    def subscribe(self, subscriber, options=None, client=None,
                  topic=None):
        response = (client or self.client).post(
            '/v2/topics/%s/subscriptions' % (topic or self.topic),
            json={'subscriber': subscriber, 'ttl': 3600,
                  'options': options or {}})
        self.assertEqual(201, response.status_code, response.text)
        return response.json()['subscription_id']

    def publish(self, messages, client=None, topic=None):
        response = (client or self.client).post(
            '/v2/topics/%s/messages' % (topic or self.topic),
            json={'messages': messages})
        self.assertEqual(201, response.status_code, response.text)
        return response.json()

    def claim_all(self, queue, client=None):
        """Claim every message of ``queue``; return their bodies."""
        client = client or self.client
        bodies = []
        while True:
            response = client.post('/v2/queues/%s/claims' % queue,
                                   json={'ttl': 60, 'grace': 60},
                                   params={'limit': 20})
            if response.status_code == 204:
                return bodies
            self.assertEqual(201, response.status_code, response.text)
            bodies += [m['body'] for m in response.json()['messages']]

    def deliveries(self, sub_id, client=None, topic=None):
        response = (client or self.client).get(
            '/v2/topics/%s/subscriptions/%s/deliveries'
            % (topic or self.topic, sub_id))
        self.assertEqual(200, response.status_code, response.text)
        return response.json()

    def stats(self, client=None):
        response = (client or self.client).get(
            '/v2/topics/%s/stats' % self.topic)
        self.assertEqual(200, response.status_code, response.text)
        return response.json()['messages']

    def wait_delivered(self, sub_id, count, client=None):
        base.wait_until(lambda: self.deliveries(sub_id, client)['delivered']
                        >= count)


class TopicApiTest(TopicTestCase):

    def test_topic_lifecycle(self):
        path = '/v2/topics/%s' % self.topic
        self.assertEqual(404, self.client.get(path).status_code)
        response = self.client.put(path, json={'_default_message_ttl': 60})
        self.assertEqual(201, response.status_code, response.text)
        self.assertEqual(204, self.client.put(path, json={
            '_default_message_ttl': 120}).status_code)
        self.assertEqual({'_default_message_ttl': 120},
                         self.client.get(path).json())
        listed = self.client.get('/v2/topics', params={'limit': 20})
        self.assertIn(self.topic, [t['name']
                                   for t in listed.json()['topics']])
        self.assertEqual(0, self.stats()['retained'])
        self.assertEqual(405, self.client.get(path + '/messages').status_code)
        sub_id = self.subscribe(self.receiver.url(self.topic))
        self.assertEqual(204, self.client.delete(path).status_code)
        self.assertEqual(404, self.client.get(path).status_code)
        self.assertEqual(404, self.client.get(
            path + '/subscriptions/%s' % sub_id).status_code)

    def test_bad_metadata_is_refused(self):
        response = self.client.put('/v2/topics/%s' % self.topic,
                                   json={'_default_message_ttl': 'x'})
        self.assertEqual(400, response.status_code, response.text)

    def test_metadata_patch(self):
        path = '/v2/topics/%s' % self.topic
        patch = {'Content-Type':
                 'application/openstack-messaging-v2.0-json-patch'}

        def change(operations, headers=patch):
            return self.client.patch(path, json=operations, headers=headers)
        response = change([{'op': 'add', 'path': '/metadata/a', 'value': 1}])
        self.assertEqual(404, response.status_code, response.text)
        self.assertIn('Topic %s does not exist' % self.topic,
                      response.json()['description'])
        self.client.put(path, json={'a': 1, '_default_message_ttl': 60})

        response = change([
            {'op': 'add', 'path': '/metadata/b', 'value': [2]},
            {'op': 'replace', 'path': '/metadata/_default_message_ttl',
             'value': 120},
            {'op': 'remove', 'path': '/metadata/a'}])
        self.assertEqual(200, response.status_code, response.text)
        self.assertEqual([2], response.json()['b'])
        self.assertEqual({'b': [2], '_default_message_ttl': 120},
                         self.client.get(path).json())

        refused = [
            ([{'op': 'add', 'path': '/metadata/b', 'value': 1}],
             {'Content-Type': 'application/json'}, 415, 'json-patch'),
            ([{'op': 'replace', 'path': '/metadata/nope', 'value': 1}],
             patch, 409, 'nope'),
            ([{'op': 'remove', 'path': '/metadata/nope'}], patch, 409,
             'nope'),
            ([{'op': 'add', 'path': '/metadata/_default_message_ttl',
               'value': 'x'}], patch, 400, '_default_message_ttl'),
            ([{'op': 'move', 'path': '/metadata/b'}], patch, 400, 'move'),
            ({'op': 'add'}, patch, 400, 'JSON array'),
        ]
        for operations, headers, status, text in refused:
            response = change(operations, headers)
            self.assertEqual(status, response.status_code,
                             (operations, response.text))
            self.assertIn(text, response.text, operations)
        response = self.client.patch(path, headers=patch)
        self.assertEqual(400, response.status_code, response.text)
        # Nothing refused changed anything.
        self.assertEqual({'b': [2], '_default_message_ttl': 120},
                         self.client.get(path).json())

    def test_subscription_crud_and_policy_errors(self):
        sub_id = self.subscribe(self.receiver.url(self.topic),
                                {'filter_policies': ['a']})
        item = '/v2/topics/%s/subscriptions/%s' % (self.topic, sub_id)
        found = self.client.get(item).json()
        self.assertEqual(['a'], found['options']['filter_policies'])
        self.assertEqual('topic:' + self.topic, found['source'])
        listed = self.client.get('/v2/topics/%s/subscriptions'
                                 % self.topic).json()['subscriptions']
        self.assertEqual([sub_id], [s['id'] for s in listed])
        response = self.client.patch(item, json={
            'options': {'filter_policies': ['x' * 17]}})
        self.assertEqual(400, response.status_code, response.text)
        self.assertIn('17 characters', response.json()['description'])
        self.assertEqual(204, self.client.patch(item, json={
            'options': {'binding_keys': ['a.#']}}).status_code)
        self.assertEqual(204, self.client.put(item + '/confirm', json={
            'confirmed': True}).status_code)
        response = self.client.post(
            '/v2/topics/%s/subscriptions' % self.topic,
            json={'subscriber': self.receiver.url('other'),
                  'options': {'filter_policy': {'a': 'b'}}})
        self.assertEqual(400, response.status_code, response.text)
        self.assertIn('filter_policy', response.json()['description'])
        self.assertEqual(204, self.client.delete(item).status_code)
        self.assertEqual(404, self.client.get(item).status_code)

    def test_bad_queue_subscribers_get_400(self):
        cases = {
            'queue:': 'names no queue',
            'queue:a/b': 'may only contain',
            'queue:' + 'q' * 65: 'the limit is 64',
        }
        for path in ('/v2/topics/%s/subscriptions' % self.topic,
                     '/v2/queues/%s/subscriptions' % self.queue):
            for subscriber, rule in cases.items():
                response = self.client.post(path, json={
                    'subscriber': subscriber, 'ttl': 3600})
                self.assertEqual(400, response.status_code,
                                 (subscriber, response.text))
                self.assertIn(rule, response.json()['description'])
            response = self.client.post(path, json={
                'subscriber': 'queue:fine',
                'options': {'post_data': '"$zaqar_message$"'}})
            self.assertEqual(400, response.status_code, response.text)
            self.assertIn('post_data', response.json()['description'])

    def test_match_explains_a_topic_and_delivers_nothing(self):
        self.client.put('/v2/topics/%s' % self.topic)
        placed = self.subscribe(self.receiver.url(self.topic + '/p'),
                                {'filter_policies': ['order_placed']})
        audit = self.subscribe(self.receiver.url(self.topic + '/a'),
                               {'binding_keys': ['audit.#']})
        # A queue of the same name is not the topic.
        self.client.subscribe(self.topic, self.receiver.url('queue'))
        response = self.client.post(
            '/v2/topics/%s/subscriptions/match' % self.topic,
            json={'message': {'body': 1,
                              'filter_policies': ['order_placed']}})
        self.assertEqual(200, response.status_code, response.text)
        found = response.json()
        self.assertEqual([placed],
                         [s['subscription_id'] for s in found['matched']])
        [missed] = found['not_matched']
        self.assertEqual(audit, missed['subscription_id'])
        self.assertIn('binding_keys', missed['reason'])
        response = self.client.post(
            '/v2/topics/%s/subscriptions/match' % self.topic,
            json={'message': {'body': 1, 'routing_key': 'a..b'}})
        self.assertEqual(400, response.status_code, response.text)
        self.assertIn('routing_key', response.json()['description'])
        self.assertEqual(0, self.deliveries(placed)['delivered']
                         + self.deliveries(placed)['pending'])
        self.assertEqual([], self.receiver.requests(self.topic))

    def test_topic_and_queue_of_one_name_stay_apart(self):
        name = self.name('same')
        self.assertEqual(201, self.client.subscribe(
            name, self.receiver.url(name + '/queue')).status_code)
        self.subscribe(self.receiver.url(name + '/topic'), topic=name)
        self.publish([{'body': 'to the topic'}], topic=name)
        self.client.post_messages(name, [{'body': 'to the queue'}])
        [topic_request] = self.receiver.wait_for(1, name + '/topic')
        [queue_request] = self.receiver.wait_for(1, name + '/queue')
        self.assertEqual('to the topic', topic_request.json['body'])
        self.assertEqual('to the queue', queue_request.json['body'])
        self.assertEqual(['to the queue'], self.claim_all(name))


class TopicDeliveryTest(TopicTestCase):

    def test_fan_out_to_queues_and_webhooks_by_policy(self):
        placed, cancelled, large = (self.name('placed'),
                                    self.name('cancelled'),
                                    self.name('large'))
        for queue in (placed, cancelled, large):
            self.assertEqual(201, self.client.create_queue(queue).status_code)
        subs = {
            placed: self.subscribe('queue:' + placed,
                                   {'filter_policies': ['order_placed']}),
            cancelled: self.subscribe('queue:' + cancelled,
                                      {'binding_keys': ['order.cancelled.#']}),
            large: self.subscribe('queue:' + large, {'filter_policy': {
                'amount': [{'numeric': ['>', 100]}]}}),
        }
        everything = self.subscribe(self.receiver.url(self.topic + '/all'))
        tagged = self.subscribe(self.receiver.url(self.topic + '/tagged'),
                                {'filter_policies': ['order_placed']})
        self.publish([
            {'body': {'n': 1}, 'ttl': 300,
             'filter_policies': ['order_placed']},
            {'body': {'n': 2}, 'routing_key': 'order.cancelled.eu'},
            {'body': {'n': 3}, 'attributes': {'amount': 150}},
            {'body': {'n': 4}, 'attributes': {'amount': 50},
             'routing_key': 'order.placed'},
        ])
        for queue, count in ((placed, 1), (cancelled, 1), (large, 1)):
            self.wait_delivered(subs[queue], count)
        self.assertEqual([{'n': 1}], self.claim_all(placed))
        self.assertEqual([{'n': 2}], self.claim_all(cancelled))
        self.assertEqual([{'n': 3}], self.claim_all(large))
        self.assertEqual([1, 2, 3, 4], sorted(
            r.json['body']['n']
            for r in self.receiver.wait_for(4, self.topic + '/all')))
        [request] = self.receiver.wait_for(1, self.topic + '/tagged')
        self.assertEqual({'n': 1}, request.json['body'])
        self.assertEqual(['order_placed'], request.json['filter_policies'])
        self.wait_delivered(everything, 4)
        self.wait_delivered(tagged, 1)
        self.assertEqual(0, self.stats()['retained'])
        self.assertEqual(8, self.stats()['delivered'])

    def test_target_queue_keeps_ttl_and_fields_and_filters_again(self):
        target = self.name('chain')
        self.assertEqual(201, self.client.create_queue(target).status_code)
        self.subscribe('queue:' + target)
        self.assertEqual(201, self.client.subscribe(
            target, self.receiver.url(target), {
                'binding_keys': ['eu.#']}).status_code)
        self.publish([{'body': 'eu', 'ttl': 321, 'routing_key': 'eu.paris'},
                      {'body': 'us', 'ttl': 321, 'routing_key': 'us.ny'}])
        [request] = self.receiver.wait_for(1, target)
        self.assertEqual('eu', request.json['body'])
        self.assertEqual('eu.paris', request.json['routing_key'])
        self.assertEqual(target, request.json['queue_name'])
        # Each message is its own delivery, possibly by another process.
        base.wait_until(lambda: len(self.client.messages(target)) == 2)
        messages = self.client.messages(target)
        self.assertEqual(['eu', 'us'], sorted(m['body'] for m in messages))
        self.assertEqual({321}, {m['ttl'] for m in messages})

    def test_queue_subscriber_on_a_queue(self):
        source, target = self.name('source'), self.name('target')
        self.client.create_queue(target)
        self.assertEqual(201, self.client.subscribe(
            source, 'queue:' + target,
            {'filter_policies': ['keep']}).status_code)
        self.client.post_messages(source, [
            {'body': 'kept', 'filter_policies': ['keep']},
            {'body': 'skipped', 'filter_policies': ['other']}])
        base.wait_until(lambda: self.client.total_messages(target) >= 1)
        self.assertEqual(['kept'], self.claim_all(target))

    def test_message_matching_nobody_is_dropped(self):
        sub_id = self.subscribe(self.receiver.url(self.topic),
                                {'filter_policies': ['wanted']})
        self.publish([{'body': 'unwanted', 'filter_policies': ['other']}])
        self.publish([{'body': 'wanted', 'filter_policies': ['wanted']}])
        [request] = self.receiver.wait_for(1, self.topic)
        self.assertEqual('wanted', request.json['body'])
        self.wait_delivered(sub_id, 1)
        self.assertEqual({'retained': 0, 'total': 0, 'retrying': 0},
                         {k: self.stats()[k]
                          for k in ('retained', 'total', 'retrying')})

    def test_missing_target_queue_is_retried_until_it_exists(self):
        target = self.name('late')
        sub_id = self.subscribe('queue:' + target, BACKOFF)
        self.publish([{'body': 'waits'}])
        base.wait_until(lambda: self.deliveries(sub_id)['retrying'] == 1)
        found = self.deliveries(sub_id)
        self.assertEqual(1, found['pending'])
        self.assertIn('does not exist', found['last_error'])
        self.assertEqual(1, self.stats()['retained'])
        self.assertEqual(201, self.client.create_queue(target).status_code)
        self.wait_delivered(sub_id, 1)
        self.assertEqual(['waits'], self.claim_all(target))
        self.assertEqual(0, self.stats()['retained'])

    def test_message_too_large_for_the_target_is_a_failure(self):
        target = self.name('small')
        self.client.create_queue(target, {'_max_messages_post_size': 64})
        sub_id = self.subscribe('queue:' + target, BACKOFF)
        self.publish([{'body': 'x' * 100}])
        base.wait_until(lambda: self.deliveries(sub_id)['retrying'] == 1)
        self.assertIn('_max_messages_post_size',
                      self.deliveries(sub_id)['last_error'])
        self.assertEqual([], self.claim_all(target))

    def test_projects_cannot_reach_each_other(self):
        shared = self.name('shared')
        other = base.Client(self.zaqar.url, project='other-%s'
                            % uuid.uuid4().hex[:8])
        self.addCleanup(other.close)
        self.assertEqual(201, other.create_queue(shared).status_code)
        # This project has no queue of that name: its delivery fails,
        # and the other project's queue stays empty.
        sub_id = self.subscribe('queue:' + shared, BACKOFF)
        self.publish([{'body': 'mine'}])
        base.wait_until(lambda: self.deliveries(sub_id)['retrying'] == 1)
        self.assertEqual([], self.claim_all(shared, client=other))
        # Nor does the other project see this project's topic.
        self.assertEqual(404, other.get('/v2/topics/%s'
                                        % self.topic).status_code)
        self.assertEqual(404, other.get(
            '/v2/topics/%s/subscriptions/%s' % (self.topic,
                                                sub_id)).status_code)
        listed = other.get('/v2/topics').json()['topics']
        self.assertNotIn(self.topic, [t['name'] for t in listed])


class TopicConfirmationTest(TopicTestCase):
    """``require_confirmation``: the signed URL names the topic's route."""

    CONF_OVERRIDES = test_retries.overrides(
        notification={'require_confirmation': 'true'},
        signed_url={'secret_key': 'a-secret-for-the-tests'})

    def test_the_confirmation_url_is_the_topics_and_works(self):
        prefix = self.topic + '/hook'
        sub_id = self.subscribe(self.receiver.url(prefix))
        [request] = self.receiver.wait_for(1, prefix)
        message = request.json
        path = '/v2/topics/%s/subscriptions/%s/confirm' % (self.topic, sub_id)
        self.assertEqual(('SubscriptionConfirmation', path,
                          'You have chosen to subscribe to the topic: %s'
                          % self.topic),
                         (message['Message_Type'], message['URL-Paths'],
                          message['Message']))
        signed = {name: message[name] for name in (
            'URL-Signature', 'URL-Methods', 'URL-Paths', 'URL-Expires',
            'X-Project-ID')}
        item = '/v2/topics/%s/subscriptions/%s' % (self.topic, sub_id)
        self.assertFalse(self.client.get(item).json()['confirmed'])

        # A signature of another path is refused; the one sent is taken.
        forged = dict(signed, **{'URL-Signature': '0' * 64})
        response = self.client.put(path, headers=forged,
                                   json=message['SubscribeBody'])
        self.assertEqual(404, response.status_code, response.text)
        response = self.client.put(path, headers=signed,
                                   json=message['SubscribeBody'])
        self.assertEqual(204, response.status_code, response.text)
        self.assertTrue(self.client.get(item).json()['confirmed'])

        # Unsubscribing sends a confirmation under the topic's route too.
        response = self.client.put(path, headers=signed,
                                   json=message['UnsubscribeBody'])
        self.assertEqual(204, response.status_code, response.text)
        [_, request] = self.receiver.wait_for(2, prefix)
        self.assertEqual(('UnsubscribeConfirmation', path),
                         (request.json['Message_Type'],
                          request.json['URL-Paths']))


class TestRedisTopics(test_topic_store.TopicsContract, unittest.TestCase):
    """The redis topic registry, on a real redis."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        workdir = tempfile.mkdtemp(prefix='zaqar-filtering-topics-')
        cls.addClassCleanup(shutil.rmtree, workdir, ignore_errors=True)
        cls.redis = base.RedisServer(workdir)
        cls.addClassCleanup(cls.redis.stop)
        cls.redis.start()

    def setUp(self):
        super().setUp()
        client = redis.Redis.from_url(self.redis.uri)
        self.addCleanup(client.close)
        client.flushdb()
        self.topics = topic_store.RedisTopics(client)
