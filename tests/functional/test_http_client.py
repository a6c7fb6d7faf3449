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

"""The event-loop HTTP client against servers on 127.0.0.1 that answer
with exactly the bytes each test gives."""

import asyncio
import datetime
import ssl
import tempfile
import unittest

from zaqar_filtering.delivery import http_client
from zaqar_filtering.stages import webhook

HOST = '127.0.0.1'
OK = b'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n'


class ScriptedServer:
    """Reads each request whole, records it, and writes the next answer.

    An answer is bytes, or None to close the connection without one, or
    'silent' to keep the connection open and never answer.
    """

    def __init__(self, *answers, close_after=False):
        self.answers = list(answers)
        self.requests = []
        self.connections = 0
        self.close_after = close_after

    async def start(self, tls=None):
        self.server = await asyncio.start_server(self._serve, HOST, 0,
                                                 ssl=tls)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def stop(self):
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader, writer):
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b'\r\n\r\n')
                length = 0
                for line in head.split(b'\r\n'):
                    name, _, value = line.partition(b':')
                    if name.lower() == b'content-length':
                        length = int(value)
                body = await reader.readexactly(length)
                self.requests.append((head, body))
                answer = self.answers.pop(0) if self.answers else OK
                if answer is None:
                    break
                if answer == 'silent':
                    await asyncio.sleep(30)
                    break
                writer.write(answer)
                await writer.drain()
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def run(coroutine):
    return asyncio.run(coroutine)


async def post(client, server, body=b'{}', headers=None, path='/hook',
               scheme='http'):
    return await client.post((scheme, HOST, server.port), path,
                             '%s:%d' % (HOST, server.port), body,
                             headers or {'Content-Type': 'application/json'})


class TestClient(unittest.TestCase):

    def exchange(self, *answers, posts=1, timeout=2.0, **kwargs):
        """Post ``posts`` times in a row; return (statuses, server)."""
        async def go():
            server = await ScriptedServer(*answers, **kwargs).start()
            client = http_client.Client(timeout, None)
            statuses = []
            try:
                for _ in range(posts):
                    try:
                        statuses.append(await post(client, server))
                    except Exception as exc:
                        statuses.append(exc)
            finally:
                client.close()
                await server.stop()
            return statuses, server
        return run(go())

    def test_posts_keep_one_connection(self):
        statuses, server = self.exchange(posts=3)
        self.assertEqual([200, 200, 200], statuses)
        self.assertEqual(1, server.connections)
        head, body = server.requests[0]
        self.assertTrue(head.startswith(b'POST /hook HTTP/1.1\r\n'))
        self.assertIn(b'\r\nHost: 127.0.0.1:%d\r\n' % server.port, head)
        self.assertIn(b'\r\nContent-Length: 2\r\n', head)
        self.assertEqual(b'{}', body)

    def test_posts_at_once_share_a_few_connections(self):
        async def go():
            server = await ScriptedServer().start()
            client = http_client.Client(2.0, None)
            try:
                statuses = await asyncio.gather(*(
                    post(client, server) for _ in range(30)))
            finally:
                client.close()
                await server.stop()
            return statuses, server
        statuses, server = run(go())
        self.assertEqual([200] * 30, statuses)
        self.assertLessEqual(server.connections,
                             http_client.CONNECTIONS_PER_ORIGIN)

    def test_a_body_with_a_length_is_read_and_dropped(self):
        statuses, server = self.exchange(
            b'HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello', posts=2)
        self.assertEqual([201, 200], statuses)
        self.assertEqual(1, server.connections)

    def test_a_chunked_body_is_read_whole(self):
        chunked = (b'HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n'
                   b'\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\n'
                   b'X-Trailer: t\r\n\r\n')
        statuses, server = self.exchange(chunked, posts=2)
        self.assertEqual([202, 200], statuses)
        self.assertEqual(1, server.connections)

    def test_interim_answers_are_skipped(self):
        statuses, _ = self.exchange(
            b'HTTP/1.1 100 Continue\r\n\r\n' + OK.replace(b'200 OK',
                                                          b'204 No Content'))
        self.assertEqual([204], statuses)

    def test_a_body_until_the_connection_closes(self):
        statuses, server = self.exchange(
            b'HTTP/1.0 200 OK\r\n\r\nthe end is the close', posts=2,
            close_after=True)
        self.assertEqual([200, 200], statuses)
        self.assertEqual(2, server.connections)

    def test_connection_close_opens_a_new_one(self):
        close = (b'HTTP/1.1 200 OK\r\nConnection: close\r\n'
                 b'Content-Length: 0\r\n\r\n')
        statuses, server = self.exchange(close, close, posts=2,
                                         close_after=True)
        self.assertEqual([200, 200], statuses)
        self.assertEqual(2, server.connections)

    def test_a_kept_connection_the_peer_closed_is_retried_once(self):
        # The first answer keeps the connection alive, then the server
        # closes it without answering the second request.
        statuses, server = self.exchange(OK, None, posts=2)
        self.assertEqual([200, 200], statuses)
        self.assertEqual(2, server.connections)
        self.assertEqual(3, len(server.requests))

    def test_a_new_connection_closed_without_an_answer_fails(self):
        statuses, _ = self.exchange(None)
        self.assertIsInstance(statuses[0], http_client.StaleConnection)

    def test_error_statuses_are_returned(self):
        statuses, _ = self.exchange(
            b'HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\n'
            b'busy', posts=2)
        self.assertEqual([503, 200], statuses)

    def test_no_answer_times_out(self):
        statuses, _ = self.exchange('silent', timeout=0.2)
        self.assertIsInstance(statuses[0], TimeoutError)
        self.assertEqual('timed out: no answer in 0.2 s', str(statuses[0]))

    def test_a_refused_connection_is_an_os_error(self):
        async def go():
            server = await ScriptedServer().start()
            await server.stop()
            client = http_client.Client(1.0, None)
            with self.assertRaises(OSError):
                await post(client, server)
        run(go())

    def test_garbage_is_a_protocol_error(self):
        statuses, _ = self.exchange(b'SMTP ready\r\n\r\n')
        self.assertIsInstance(statuses[0], http_client.ProtocolError)
        self.assertIn('not an HTTP/1.x status line', str(statuses[0]))

    def test_a_truncated_body_is_a_protocol_error(self):
        statuses, _ = self.exchange(
            b'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc',
            close_after=True)
        self.assertIsInstance(statuses[0], http_client.ProtocolError)


class TestRequestHead(unittest.TestCase):

    def test_headers_that_would_split_the_request_are_refused(self):
        for headers in ({'X-A': 'v\r\nX-Injected: 1'}, {'X-A\n': 'v'},
                        {'X:A': 'v'}):
            with self.assertRaises(ValueError):
                http_client.request_head('POST', '/', 'h', headers, 0)

    def test_our_length_and_their_host(self):
        head = http_client.request_head(
            'POST', '/p?q=1', 'h:80', {'Host': 'virtual', 'Content-Length':
                                       '999', 'X-A': 'b'}, 7)
        self.assertEqual(b'POST /p?q=1 HTTP/1.1\r\nHost: virtual\r\n'
                         b'X-A: b\r\nContent-Length: 7\r\n\r\n', head)


def _certificate(directory):
    """Write a self-signed certificate for 127.0.0.1; return its paths."""
    import ipaddress

    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives import serialization
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(HOST))]), critical=False)
        .sign(key, hashes.SHA256()))
    cert_path, key_path = directory + '/cert.pem', directory + '/key.pem'
    with open(cert_path, 'wb') as f:
        f.write(certificate.public_bytes(serialization.Encoding.PEM))
    with open(key_path, 'wb') as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


class TestTLS(unittest.TestCase):

    def test_https_is_verified(self):
        with tempfile.TemporaryDirectory() as directory:
            cert, key = _certificate(directory)
            served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            served.load_cert_chain(cert, key)
            trusting = ssl.create_default_context(cafile=cert)

            async def go():
                server = await ScriptedServer().start(tls=served)
                try:
                    client = http_client.Client(2.0, trusting)
                    status = await post(client, server, scheme='https')
                    client.close()
                    strict = http_client.Client(2.0,
                                                ssl.create_default_context())
                    with self.assertRaises(ssl.SSLCertVerificationError):
                        await post(strict, server, scheme='https')
                finally:
                    await server.stop()
                return status
            self.assertEqual(200, run(go()))


class TestWebhookAttempt(unittest.TestCase):

    def test_outcomes_as_text(self):
        async def go():
            server = await ScriptedServer(
                b'HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n').start()
            task = webhook.WebhookTask(timeout=2)
            url = 'http://user:p%%40ss@%s:%d/hook?x=1' % (HOST, server.port)
            try:
                failed = await task.attempt_async(url, '{"a": "é"}', {})
                delivered = await task.attempt_async(url, '{}', {})
                not_http = await task.attempt_async('ftp://h/x', '{}', {})
            finally:
                await task.close_async()
                await server.stop()
            return failed, delivered, not_http, server.requests
        failed, delivered, not_http, requests = run(go())
        self.assertEqual('HTTP 500', failed)
        self.assertIsNone(delivered)
        self.assertEqual('ValueError: not an http(s) URL: ftp://h/x',
                         not_http)
        head, body = requests[0]
        self.assertTrue(head.startswith(b'POST /hook?x=1 HTTP/1.1\r\n'))
        self.assertIn(b'\r\nAuthorization: Basic dXNlcjpwQHNz\r\n', head)
        self.assertEqual('{"a": "é"}'.encode('utf-8'), body)
