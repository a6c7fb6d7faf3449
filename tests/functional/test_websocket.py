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

"""Filter fields over Zaqar's websocket transport.

Zaqar's websocket API keeps only ``ttl`` and ``body`` of posted messages,
so websocket clients give filter fields in the body, under ``_filtering``.
A websocket server and an HTTP server share one redis store here.
"""

import base64
import json
import os
import socket
import struct
import time
import uuid

from tests.functional import base
from tests.functional.test_notifier import FILTERING


class WebsocketClient:
    """A minimal RFC 6455 client for Zaqar's JSON websocket API."""

    def __init__(self, port, project):
        self.headers = {'Client-ID': str(uuid.uuid4()),
                        'X-Project-ID': project}
        self.sock = socket.create_connection((base.HOST, port),
                                             timeout=base.WAIT_TIMEOUT)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((
            'GET / HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n'
            'Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n'
            'Sec-WebSocket-Version: 13\r\n\r\n' % (base.HOST, key)).encode())
        self.buffer = b''
        while b'\r\n\r\n' not in self.buffer:
            self.buffer += self._recv()
        self.buffer = self.buffer.split(b'\r\n\r\n', 1)[1]

    def close(self):
        self.sock.close()

    def request(self, action, body):
        """Send one request and return the response document."""
        data = json.dumps({'action': action, 'headers': self.headers,
                           'body': body}).encode()
        mask = os.urandom(4)
        size = (bytes([0x80 | len(data)]) if len(data) < 126
                else bytes([0x80 | 126]) + struct.pack('!H', len(data)))
        self.sock.sendall(bytes([0x81]) + size + mask + bytes(
            byte ^ mask[i % 4] for i, byte in enumerate(data)))
        return json.loads(self._frame())

    def _recv(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError('the websocket server closed')
        return chunk

    def _need(self, count):
        while len(self.buffer) < count:
            self.buffer += self._recv()

    def _frame(self):
        self._need(2)
        size, start = self.buffer[1] & 0x7f, 2
        if size == 126:
            self._need(4)
            size, start = struct.unpack('!H', self.buffer[2:4])[0], 4
        elif size == 127:
            self._need(10)
            size, start = struct.unpack('!Q', self.buffer[2:10])[0], 10
        self._need(start + size)
        data = self.buffer[start:start + size]
        self.buffer = self.buffer[start + size:]
        return data.decode()


class TestWebsocket(base.ServerTestCase):

    CONF_OVERRIDES = FILTERING

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.ws_port = base.free_port()
        conf = base.write_zaqar_conf(
            cls.workdir, cls.redis.uri, base.free_port(), dict(
                FILTERING, drivers={'transport': 'websocket'},
                **{'drivers:transport:websocket': {
                    'bind': base.HOST, 'port': cls.ws_port,
                    'notification_bind': base.HOST,
                    'notification_port': base.free_port()}}),
            name='websocket.conf')
        server = base.Process(
            'zaqar-filtering-server (websocket)',
            [base.venv_script('zaqar-filtering-server'), '--config-file',
             conf], os.path.join(cls.workdir, 'websocket.log'))
        cls.addClassCleanup(server.stop)
        server.start()
        server.wait_until(cls._accepting)

    @classmethod
    def _accepting(cls):
        try:
            socket.create_connection((base.HOST, cls.ws_port), 1).close()
        except OSError:
            return False
        return True

    def test_filter_fields_in_the_body(self):
        self.assertEqual(201, self.client.create_queue(self.queue).status_code)
        response = self.client.subscribe(
            self.queue, self.receiver.url(self.queue + '/A'),
            {'filter_policies': ['apple']})
        self.assertEqual(201, response.status_code, response.text)
        ws = WebsocketClient(self.ws_port,
                             self.client.session.headers['X-Project-ID'])
        self.addCleanup(ws.close)
        posted = ws.request('message_post', {
            'queue_name': self.queue, 'messages': [
                {'ttl': 300, 'body': {'_filtering': {
                    'filter_policies': ['apple']}, 'n': 1}},
                {'ttl': 300, 'body': {'n': 2}}]})
        self.assertEqual(201, posted['headers']['status'], posted)
        [request] = self.receiver.wait_for(1, self.queue)
        time.sleep(0.5)
        self.assertEqual(1, len(self.receiver.requests(self.queue)))
        self.assertEqual(['apple'], request.json['filter_policies'])

        rejected = ws.request('message_post', {
            'queue_name': self.queue, 'messages': [
                {'ttl': 300, 'body': {'_filtering': {
                    'filter_policies': ['a' * 17]}}}]})
        self.assertEqual(400, rejected['headers']['status'], rejected)
        self.assertIn('messages[0]: body/_filtering/filter_policies: tag',
                      json.dumps(rejected['body']))
        self.assertEqual(2, self.client.total_messages(self.queue))
