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

"""``POST /v2/queues/{q}/subscriptions/match`` in a real server.

A real zaqar-filtering-server with the filtering stages, its redis store
and a real webhook receiver: the dry run names who would receive a
message and why the others would not, stores and delivers nothing, and
agrees with what a real post then delivers.
"""

import os
import time
import uuid

from tests.functional import base

FILTERING = {'storage': {
    'message_pipeline': 'zaqar_filtering.notifier',
    'subscription_pipeline': 'zaqar_filtering.validation'}}
# Long enough for a delivery that should not happen to show up.
GRACE = 0.5

SUBSCRIPTIONS = {
    'tags': {'filter_policies': ['xiaomi']},
    'tags-ok': {'filter_policies': ['imac', 'xiaomi']},
    'keys': {'binding_keys': ['order.#']},
    'keys-ok': {'binding_keys': ['audit.*']},
    'price': {'filter_policy': {'price': [{'numeric': ['>', 200]}]}},
    'price-ok': {'filter_policy': {'price': [{'numeric': ['<=', 150]}],
                                   'store': [{'prefix': 'eu-'}]}},
    'body': {'filter_policy': {'order': {'total': [{'numeric': ['>', 99]}]}},
             'filter_policy_scope': 'MessageBody'},
    'body-ok': {'filter_policy': {'order': {'id': [{'exists': True}]}},
                'filter_policy_scope': 'MessageBody'},
    'all': {},
}
MESSAGE = {'body': {'order': {'id': 7, 'total': 12}}, 'ttl': 300,
           'filter_policies': ['apple', 'imac'], 'routing_key': 'audit.eu',
           'attributes': {'price': 150, 'store': 'eu-west'}}
REASONS = {
    'tags': "filter_policies: the message's tags [apple, imac] share none "
            "of [xiaomi]",
    'keys': "binding_keys: routing key 'audit.eu' matches none of [order.#]",
    'price': 'filter_policy: price 150 is not > 200',
    'body': 'filter_policy: order.total 12 is not > 99',
}


class MatchTestCase(base.ServerTestCase):

    CONF_OVERRIDES = FILTERING

    def subscribe(self, name, options, client=None):
        response = (client or self.client).subscribe(
            self.queue, self.receiver.url('%s/%s' % (self.queue, name)),
            options)
        self.assertEqual(201, response.status_code, response.text)
        return response.json()['subscription_id']

    def match(self, document, client=None, queue=None, **params):
        return (client or self.client).post(
            '/v2/queues/%s/subscriptions/match' % (queue or self.queue),
            json=document, params=params)

    def names(self, entries):
        """The subscription names (receiver paths) of match entries."""
        return sorted(entry['subscriber'].rsplit('/', 1)[1]
                      for entry in entries)


class TestMatch(MatchTestCase):

    def test_every_policy_kind_with_its_reason(self):
        ids = {name: self.subscribe(name, options)
               for name, options in SUBSCRIPTIONS.items()}
        response = self.match({'message': MESSAGE})
        self.assertEqual(200, response.status_code, response.text)
        result = response.json()
        self.assertEqual(['all', 'body-ok', 'keys-ok', 'price-ok', 'tags-ok'],
                         self.names(result['matched']))
        self.assertEqual(
            {name: {'subscription_id': ids[name],
                    'subscriber': self.receiver.url(
                        '%s/%s' % (self.queue, name)),
                    'reason': reason}
             for name, reason in REASONS.items()},
            {self.names([entry])[0]: entry
             for entry in result['not_matched']})
        for entry in result['matched']:
            self.assertEqual({'subscription_id', 'subscriber'}, set(entry))

    def test_nothing_is_stored_or_delivered_and_a_post_agrees(self):
        for name, options in SUBSCRIPTIONS.items():
            self.subscribe(name, options)
        for _ in range(3):
            response = self.match({'message': MESSAGE})
            self.assertEqual(200, response.status_code, response.text)
        time.sleep(GRACE)
        self.assertEqual([], self.receiver.requests(self.queue))
        self.assertEqual(0, self.client.total_messages(self.queue))

        # The real post delivers to exactly the subscriptions it named.
        response = self.client.post_messages(self.queue, [MESSAGE])
        self.assertEqual(201, response.status_code, response.text)
        matched = self.names(self.match({'message': MESSAGE}).json()[
            'matched'])
        self.receiver.wait_for(len(matched), self.queue)
        time.sleep(GRACE)
        self.assertEqual(matched, sorted(
            request.path.rsplit('/', 1)[1]
            for request in self.receiver.requests(self.queue)))

    def test_a_queue_that_does_not_exist_is_not_created(self):
        response = self.match({'message': {'body': 1}})
        self.assertEqual(200, response.status_code, response.text)
        self.assertEqual({'matched': [], 'not_matched': [], 'links': []},
                         response.json())
        queues = self.client.get('/v2/queues').json()['queues']
        self.assertNotIn(self.queue, [queue['name'] for queue in queues])

    def test_filter_fields_in_the_body_count(self):
        self.subscribe('keys', {'binding_keys': ['order.#']})
        response = self.match({'message': {'body': {
            '_filtering': {'routing_key': 'order.placed'}}}})
        self.assertEqual(200, response.status_code, response.text)
        self.assertEqual(['keys'], self.names(response.json()['matched']))

    def test_paging(self):
        ids = sorted(self.subscribe('s%d' % i, {'filter_policies': ['t']})
                     for i in range(5))
        seen = []
        response = self.match({'message': {'body': 1}}, limit=2)
        pages = 0
        while True:
            self.assertEqual(200, response.status_code, response.text)
            page = response.json()
            self.assertEqual([], page['matched'])
            seen += [entry['subscription_id']
                     for entry in page['not_matched']]
            if not page['links']:
                break
            self.assertLessEqual(len(page['not_matched']), 2)
            pages += 1
            [link] = page['links']
            self.assertEqual('next', link['rel'])
            response = self.client.post(link['href'],
                                        json={'message': {'body': 1}})
        self.assertEqual(ids, sorted(seen))
        self.assertEqual(len(ids), len(set(seen)))
        self.assertEqual(3, pages)

    def test_another_projects_subscriptions_never_appear(self):
        other = base.Client(self.zaqar.url, project='another-project')
        self.addCleanup(other.close)
        self.subscribe('mine', {})
        self.subscribe('theirs', {}, client=other)
        self.assertEqual(['mine'], self.names(
            self.match({'message': {'body': 1}}).json()['matched']))
        self.assertEqual(['theirs'], self.names(
            self.match({'message': {'body': 1}}, client=other).json()[
                'matched']))

    def test_a_stored_invalid_policy_is_named(self):
        # Written around the API, as a subscription from before the plugin.
        self.redis.seed_subscriptions(
            self.client.project, self.queue,
            [(self.receiver.url(self.queue + '/old'),
              {'filter_policies': 'not-a-list'})])
        [entry] = self.match({'message': {'body': 1}}).json()['not_matched']
        self.assertEqual(
            "its filter policy is invalid, so it receives nothing: "
            "filter_policies: must be a list of tags, not 'not-a-list'",
            entry['reason'])

    def test_bad_requests_are_answered_as_a_post_answers_them(self):
        self.subscribe('all', {})
        cases = [
            ('invalid tag', {'message': {'body': 1, 'filter_policies': [
                'abcdefghijklmnopq']}},
             'Invalid API request',
             "message: filter_policies: tag 'abcdefghijklmnopq' has 17 "
             "characters; the limit is 16"),
            ('wildcard routing key',
             {'message': {'body': 1, 'routing_key': 'a.*'}},
             'Invalid API request',
             "message: routing_key: routing key 'a.*': '*' and '#' are "
             "wildcards that stand alone as words in binding keys only"),
            ('attributes not an object',
             {'message': {'body': 1, 'attributes': ['x']}},
             'Invalid API request',
             'message: attributes: must be an object of attribute names to '
             'values, not ["x"]'),
            ('bad fields in the body',
             {'message': {'body': {'_filtering': {'tags': ['x']}}}},
             'Invalid API request',
             "message: body/_filtering: unknown field 'tags'; the filter "
             "fields are filter_policies, routing_key, attributes"),
            ('ttl too short', {'message': {'body': 1, 'ttl': 1}},
             'Invalid API request',
             'The TTL for a message may not exceed 1209600 seconds, and '
             'must be at least 60 seconds long.'),
            ('no body', {'message': {'ttl': 300}},
             'Invalid request body', 'Missing "body" field.'),
            ('ttl not a number', {'message': {'body': 1, 'ttl': 'long'}},
             'Invalid request body',
             'The value of the "ttl" field must be a int.'),
            ('no message', {'messages': [{'body': 1}]},
             'Invalid API request',
             'The request body must be a JSON object with the message under '
             '"message": {"message": {"body": ...}}.'),
        ]
        for name, document, title, description in cases:
            with self.subTest(name):
                response = self.match(document)
                self.assertEqual(400, response.status_code, response.text)
                self.assertEqual({'title': title,
                                  'description': description},
                                 response.json())
        self.assertEqual(0, self.client.total_messages(self.queue))

    def test_bad_json_paging_and_size(self):
        response = self.client.post(
            '/v2/queues/%s/subscriptions/match' % self.queue, data=b'{"m',
            headers={'Content-Type': 'application/json'})
        self.assertEqual(400, response.status_code, response.text)
        response = self.match({'message': {'body': 1}}, limit=0)
        self.assertEqual(400, response.status_code, response.text)
        self.assertIn('Limit must be at least 1', response.text)
        response = self.match({'message': {'body': 'x' * 300000}})
        self.assertEqual(400, response.status_code, response.text)
        self.assertIn('Message collection size is too large',
                      response.json()['description'])


class TestMatchPolicyRule(MatchTestCase):
    """The rule ``subscription:get`` decides who may ask."""

    @classmethod
    def setUpClass(cls):
        cls.CONF_OVERRIDES = dict(FILTERING)
        super().setUpClass()

    @classmethod
    def start_zaqar(cls, overrides=None, name='zaqar'):
        policy = os.path.join(cls.workdir, 'policy.yaml')
        with open(policy, 'w') as f:
            f.write('"subscription:get": "!"\n')
        overrides = dict(overrides or {},
                         oslo_policy={'policy_file': policy})
        return super().start_zaqar(overrides, name)

    def test_denied_without_the_rule(self):
        response = self.match({'message': {'body': 1}},
                              queue='q-%s' % uuid.uuid4().hex[:8])
        self.assertEqual(403, response.status_code, response.text)
