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

"""The HTTP API keeps, validates and passes on the message filter fields.

A real zaqar-filtering-server with Zaqar's stock notifier: what the stock
webhook delivers shows what reached the message pipeline.
"""

import os
import sys
import time

from tests.functional import base

STOCK_NOTIFIER = {'storage': {'message_pipeline':
                              'zaqar.notification.notifier'}}

# Serves zaqar_filtering.wsgi:application with wsgiref on port argv[1].
WSGI_SERVER = '''
import sys
from wsgiref import simple_server

from zaqar_filtering import wsgi

simple_server.make_server(
    '127.0.0.1', int(sys.argv[1]), wsgi.application).serve_forever()
'''

# Long enough for a delivery that should not happen to show up: the stock
# notifier hands deliveries to its thread pool before the post returns.
GRACE = 0.3

STORED_KEYS = {'id', 'href', 'ttl', 'age', 'body'}


class TestHttpFields(base.ServerTestCase):

    # max_tags differs from the default (5) to show the [filtering]
    # limits are read from the server's configuration.
    CONF_OVERRIDES = dict(STOCK_NOTIFIER, filtering={'max_tags': 3})

    def subscribe_receiver(self, path=''):
        self.assertEqual(201, self.client.create_queue(self.queue).status_code)
        response = self.client.subscribe(
            self.queue, self.receiver.url(self.queue + path))
        self.assertEqual(201, response.status_code, response.text)

    def assert_nothing_stored(self):
        self.assertEqual([], self.client.messages(self.queue))
        self.assertEqual(0, self.client.total_messages(self.queue))

    def assert_bad_request(self, response, description, title=None):
        self.assertEqual(400, response.status_code, response.text)
        self.assertEqual(
            {'title': title or 'Invalid API request',
             'description': description},
            response.json())

    def test_fields_reach_the_notifier(self):
        self.subscribe_receiver()
        message = {
            'body': {'order': 1234}, 'ttl': 300,
            'filter_policies': ['order_placed', 'audit'],
            'routing_key': 'order.placed.eu',
            'attributes': {'store': 'example_corp',
                           'price_usd': {'Type': 'Number',
                                         'Value': '210.75'},
                           'sizes': ['S', 'M']},
        }
        response = self.client.post_messages(self.queue, [message])
        self.assertEqual(201, response.status_code, response.text)

        [request] = self.receiver.wait_for(1, self.queue)
        self.assertEqual(
            {'body': {'order': 1234}, 'ttl': 300,
             # Validated fields: tags become a sorted list of distinct tags.
             'filter_policies': ['audit', 'order_placed'],
             'routing_key': 'order.placed.eu',
             'attributes': message['attributes'],
             'Message_Type': 'Notification', 'queue_name': self.queue},
            request.json)
        # Filter fields decide delivery; storage keeps stock messages.
        [stored] = self.client.messages(self.queue)
        self.assertEqual(STORED_KEYS, set(stored))
        self.assertEqual({'order': 1234}, stored['body'])

    def test_invalid_fields_reject_the_whole_post(self):
        self.subscribe_receiver()
        good = {'body': 'fine', 'filter_policies': ['ok']}
        cases = [
            ('long tag',
             [{'body': 1, 'filter_policies': ['abcdefghijklmnopq']}],
             "messages[0]: filter_policies: tag 'abcdefghijklmnopq' has 17 "
             "characters; the limit is 16"),
            ('tag with braces',
             [{'body': 1, 'filter_policies': ['{0}{1}{2}{3}{4}{5}']}],
             "messages[0]: filter_policies: tag '{0}{1}{2}{3}{4}{5}' has 18 "
             "characters; the limit is 16"),
            ('too many tags for the configured limit',
             [{'body': 1, 'filter_policies': ['a', 'b', 'c', 'd']}],
             'messages[0]: filter_policies: 4 tags; the limit is 3'),
            ('wildcard in a routing key',
             [{'body': 1, 'routing_key': 'order.*.eu'}],
             "messages[0]: routing_key: routing key 'order.*.eu': "),
            ('attributes not an object',
             [{'body': 1, 'attributes': ['store', 'example_corp']}],
             'messages[0]: attributes: must be an object of attribute names '
             'to values, not '),
            ('one bad message in a batch of three',
             [good, {'body': 2, 'routing_key': 'a..b'}, good],
             "messages[1]: routing_key: routing key 'a..b' has an empty word"),
        ]
        for name, messages, description in cases:
            with self.subTest(name):
                response = self.client.post_messages(self.queue, messages)
                self.assertEqual(400, response.status_code, response.text)
                error = response.json()
                self.assertEqual('Invalid API request', error['title'])
                self.assertTrue(error['description'].startswith(description),
                                error['description'])
        self.assert_nothing_stored()

        # The invalid posts reached no stage: the only delivery is the one
        # of this valid post.
        response = self.client.post_messages(self.queue, [good])
        self.assertEqual(201, response.status_code, response.text)
        self.receiver.wait_for(1, self.queue)
        time.sleep(GRACE)
        [request] = self.receiver.requests(self.queue)
        self.assertEqual('fine', request.json['body'])

    def test_messages_without_fields_are_stock(self):
        self.subscribe_receiver()
        response = self.client.post_messages(
            self.queue, [{'body': {'n': 1}}, {'body': 'two', 'ttl': 120}])
        self.assertEqual(201, response.status_code, response.text)
        self.assertEqual(2, len(response.json()['resources']))

        stored = self.client.messages(self.queue)
        self.assertEqual([{'n': 1}, 'two'], [m['body'] for m in stored])
        self.assertEqual([3600, 120], [m['ttl'] for m in stored])
        self.assertEqual([STORED_KEYS] * 2, [set(m) for m in stored])

        requests = self.receiver.wait_for(2, self.queue)
        self.assertCountEqual(
            [{'body': {'n': 1}, 'ttl': 3600}, {'body': 'two', 'ttl': 120}],
            [{k: r.json[k] for k in ('body', 'ttl')} for r in requests])
        for request in requests:
            self.assertEqual({'body', 'ttl', 'Message_Type', 'queue_name'},
                             set(request.json))

    def test_stock_errors_are_kept(self):
        path = '/v2/queues/%s/messages' % self.queue
        self.assert_bad_request(
            self.client.post(path, data=b'{"messages": [{"body": '),
            'Request body could not be parsed.',
            title='Invalid request body')
        self.assert_bad_request(
            self.client.post(path, json={'body': 1}),
            'No messages were found in the request body.')
        self.assert_bad_request(
            self.client.post(path, json={'messages': {'body': 1}}),
            'Document type not supported.',
            title='Invalid request body')
        # Zaqar's own checks come first, so an invalid ttl is reported
        # rather than the invalid tag beside it.
        response = self.client.post_messages(
            self.queue, [{'body': 1, 'ttl': 5,
                          'filter_policies': ['abcdefghijklmnopq']}])
        self.assert_bad_request(
            response, 'The TTL for a message may not exceed 1209600 seconds, '
            'and must be at least 60 seconds long.')
        self.assert_nothing_stored()

    def test_wsgi_application(self):
        port = base.free_port()
        env = dict(os.environ,
                   ZAQAR_FILTERING_CONFIG_FILES=self.zaqar.conf_path)
        app = base.ZaqarServer(
            self.zaqar.conf_path, port,
            os.path.join(self.workdir, 'wsgi-%s.log' % self.queue),
            argv=[sys.executable, '-c', WSGI_SERVER, str(port)], env=env,
            name='zaqar_filtering.wsgi:application')
        self.addCleanup(app.stop)
        app.start()
        client = base.Client(app.url)
        self.addCleanup(client.close)
        self.subscribe_receiver()

        response = client.post_messages(
            self.queue, [{'body': 1, 'routing_key': 'order.#'}])
        self.assertEqual(400, response.status_code, response.text)
        self.assertTrue(response.json()['description'].startswith(
            "messages[0]: routing_key: routing key 'order.#': "),
            response.text)
        self.assertEqual(0, client.total_messages(self.queue))

        response = client.post_messages(
            self.queue, [{'body': 2, 'routing_key': 'order.placed'}])
        self.assertEqual(201, response.status_code, response.text)
        [request] = self.receiver.wait_for(1, self.queue)
        self.assertEqual('order.placed', request.json['routing_key'])
