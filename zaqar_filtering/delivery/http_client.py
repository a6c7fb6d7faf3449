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

"""HTTP/1.1 POSTs on an asyncio event loop, over kept-alive connections.

The delivery process posts thousands of webhooks a second from one event
loop: a thread per request (``http.client``) spends most of its time
handing the interpreter lock around. This client does only what a webhook
needs: one POST at a time per connection (no pipelining), answers framed
by ``Content-Length``, chunked encoding or the end of the connection,
interim ``1xx`` answers skipped, the body read and dropped.
"""

import asyncio
import collections

#: Idle connections kept, over all origins; the least recently used go.
IDLE_CONNECTIONS = 256
#: Connections to one origin that a client keeps open at most (as many as
#: the stock notifier's threads).
CONNECTIONS_PER_ORIGIN = 10
#: New connections to one origin that have not answered yet, at most: the
#: pace at which a client opens connections follows the server's.
CONNECTS_PER_ORIGIN = 2
#: The longest status line and headers accepted.
MAX_HEAD_BYTES = 65536

_NO_BODY = frozenset({204, 304})


class ProtocolError(Exception):
    """The peer's answer is not HTTP/1.x."""


class StaleConnection(ConnectionError):
    """A kept-alive connection closed before any answer came."""


def request_head(method, target, host, headers, length):
    """Return the bytes of a request line and headers.

    ``Host`` comes from ``host`` unless ``headers`` has one; the body's
    length is always ours.

    :raises ValueError: a header name or value that would split the
        request (a line break), or one not in Latin-1.
    """
    lines = ['%s %s HTTP/1.1' % (method, target)]
    names = set()
    for name, value in headers.items():
        name, value = str(name), str(value)
        if _breaks_line(name) or _breaks_line(value) or ':' in name:
            raise ValueError('invalid HTTP header %r' % name)
        lowered = name.lower()
        if lowered in ('content-length', 'transfer-encoding'):
            continue
        names.add(lowered)
        lines.append('%s: %s' % (name, value))
    if 'host' not in names:
        lines.insert(1, 'Host: ' + host)
    lines.append('Content-Length: %d' % length)
    return ('\r\n'.join(lines) + '\r\n\r\n').encode('latin-1')


def _breaks_line(text):
    return '\r' in text or '\n' in text or '\0' in text


class _Connection(asyncio.Protocol):
    """One connection; reads the answer of one request at a time."""

    def __init__(self):
        self.transport = None
        self.closed = False
        self.new = False
        self._answer = None
        self._buffer = bytearray()
        self._state = None
        self._left = 0
        self._status = 0
        self._keep = False

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        self.closed = True
        answer = self._answer
        if answer is None or answer.done():
            return
        if self._state == 'close':
            self._finish()
        elif self._state == 'head' and not self._buffer and not self._status:
            answer.set_exception(StaleConnection(
                'the connection closed before an answer'))
        else:
            answer.set_exception(ProtocolError(
                'the connection closed in the middle of the answer'))

    def send(self, data, loop):
        """Write a request; return a future of ``(status, keep_alive)``."""
        self._answer = loop.create_future()
        self._buffer.clear()
        self._state, self._status, self._keep = 'head', 0, False
        self.transport.write(data)
        return self._answer

    def close(self):
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def data_received(self, data):
        if self._answer is None or self._answer.done():
            # Nothing was asked: the connection cannot be trusted.
            self.close()
            return
        self._buffer += data
        try:
            self._parse()
        except (ProtocolError, ValueError) as exc:
            self.close()
            if not self._answer.done():
                self._answer.set_exception(
                    exc if isinstance(exc, ProtocolError)
                    else ProtocolError(str(exc)))

    def _parse(self):
        buffer = self._buffer
        while True:
            if self._state == 'head':
                end = buffer.find(b'\r\n\r\n')
                if end < 0:
                    if len(buffer) > MAX_HEAD_BYTES:
                        raise ProtocolError('answer head over %d bytes'
                                            % MAX_HEAD_BYTES)
                    return
                head = bytes(buffer[:end])
                del buffer[:end + 4]
                self._head(head)
            elif self._state == 'length':
                taken = min(self._left, len(buffer))
                del buffer[:taken]
                self._left -= taken
                if self._left:
                    return
                self._finish()
                return
            elif self._state == 'chunk':
                end = buffer.find(b'\r\n')
                if end < 0:
                    return
                size = int(bytes(buffer[:end]).split(b';', 1)[0].strip(), 16)
                del buffer[:end + 2]
                if size:
                    self._state, self._left = 'chunk-data', size + 2
                else:
                    self._state = 'trailer'
            elif self._state == 'chunk-data':
                taken = min(self._left, len(buffer))
                del buffer[:taken]
                self._left -= taken
                if self._left:
                    return
                self._state = 'chunk'
            elif self._state == 'trailer':
                end = buffer.find(b'\r\n')
                if end < 0:
                    return
                del buffer[:end + 2]
                if end == 0:
                    self._finish()
                    return
            else:  # 'close': the body ends with the connection
                buffer.clear()
                return

    def _head(self, head):
        lines = head.split(b'\r\n')
        parts = lines[0].split(b' ', 2)
        if (len(parts) < 2 or not parts[0].startswith(b'HTTP/1.')
                or len(parts[1]) != 3 or not parts[1].isdigit()):
            raise ProtocolError('not an HTTP/1.x status line: %r'
                                % lines[0][:80])
        status = int(parts[1])
        if 100 <= status < 200 and status != 101:
            return      # interim answer; the real one follows
        length = None
        chunked = False
        tokens = set()
        for line in lines[1:]:
            name, _, value = line.partition(b':')
            name = name.strip().lower()
            if name == b'content-length':
                if length is not None and length != int(value):
                    raise ProtocolError('conflicting Content-Length')
                length = int(value)
            elif name == b'transfer-encoding':
                chunked = value.strip().lower().endswith(b'chunked')
            elif name == b'connection':
                tokens.update(t.strip().lower() for t in value.split(b','))
        self._status = status
        if parts[0] == b'HTTP/1.0':
            self._keep = b'keep-alive' in tokens
        else:
            self._keep = b'close' not in tokens
        if status in _NO_BODY or status == 101:
            self._keep = self._keep and status != 101
            self._finish()
        elif chunked:
            self._state = 'chunk'
        elif length is not None:
            if length < 0:
                raise ProtocolError('negative Content-Length')
            self._state, self._left = 'length', length
            if not length:
                self._finish()
        else:
            self._state, self._keep = 'close', False

    def _finish(self):
        self._state = 'done'
        if self._buffer:
            self._keep = False      # bytes nobody asked for
        if not self._answer.done():
            self._answer.set_result((self._status, self._keep))


class _Pool:
    """The idle connections to one origin, and the posts waiting for one."""

    __slots__ = ('idle', 'open', 'connecting', 'waiters')

    def __init__(self):
        self.idle = []
        self.open = 0           # idle, in use or being opened
        self.connecting = 0     # being opened, or not answered yet
        self.waiters = collections.deque()

    def unused(self):
        return not (self.open or self.waiters)

    def closed(self, connection):
        """Close a connection of the pool, and let a waiting post open one."""
        connection.close()
        self.open -= 1
        self.wake()

    def wake(self):
        """Let the longest waiting post look again."""
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return


class Client:
    """POSTs over connections kept per origin, on the running loop.

    A post takes an idle connection to its origin, or opens one: at most
    :data:`CONNECTIONS_PER_ORIGIN`, and a new one only while fewer than
    :data:`CONNECTS_PER_ORIGIN` new ones have not answered yet, so that a
    fan-out does not overflow a small server's accept backlog (which
    drops connections for a second). The other posts wait for a
    connection to come back or for their turn to open one.

    :param timeout: seconds to wait for a connection (waiting for a turn
        included), and then for the whole answer.
    :param ssl_context: for ``https``.
    """

    def __init__(self, timeout, ssl_context):
        self._timeout = timeout
        self._ssl = ssl_context
        self._pools = collections.OrderedDict()  # least recently used first
        self._idle_count = 0

    async def post(self, origin, target, host, body, headers):
        """Post ``body``; return the answer's status.

        :param origin: ``(scheme, hostname, port)``.
        :param target: the request target (path and query).
        :param host: the ``Host`` header.
        :raises OSError: no connection, or it failed; ``TimeoutError``
            when a connection or an answer took longer than the timeout.
        :raises ProtocolError: the answer is not HTTP/1.x.
        :raises ValueError: a header cannot be sent.
        """
        data = request_head('POST', target, host, headers, len(body)) + body
        # A post ends within twice the timeout, a retry on a new connection
        # included: the delivery ledger's lease counts on it.
        connected_by = asyncio.get_running_loop().time() + self._timeout
        answered_by = connected_by + self._timeout
        connection, reused = await self._acquire(origin, False, connected_by)
        if reused:
            try:
                return await self._exchange(origin, connection, data,
                                            answered_by)
            except StaleConnection:
                # Closed by the peer meanwhile: once more, anew.
                connection, _ = await self._acquire(origin, True,
                                                    connected_by)
        return await self._exchange(origin, connection, data, answered_by)

    def close(self):
        """Close the idle connections."""
        for pool in self._pools.values():
            while pool.idle:
                pool.closed(pool.idle.pop())
        self._idle_count = 0

    def _pool(self, origin):
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = _Pool()
        else:
            self._pools.move_to_end(origin)
        return pool

    async def _acquire(self, origin, fresh, deadline):
        """Return an open connection, and whether it was kept alive."""
        loop = asyncio.get_running_loop()
        pool = self._pool(origin)
        while True:
            while pool.idle and not fresh:
                connection = pool.idle.pop()
                self._idle_count -= 1
                if not connection.closed:
                    return connection, True
                pool.closed(connection)
            if (pool.open < CONNECTIONS_PER_ORIGIN
                    and pool.connecting < CONNECTS_PER_ORIGIN):
                return await self._connect(origin, pool, deadline), False
            waiter = loop.create_future()
            pool.waiters.append(waiter)
            late = loop.call_at(deadline, _expire, waiter,
                                'no connection in %s s' % self._timeout)
            try:
                await waiter
            finally:
                late.cancel()

    async def _connect(self, origin, pool, deadline):
        scheme, hostname, port = origin
        loop = asyncio.get_running_loop()
        tls = self._ssl if scheme == 'https' else None
        pool.open += 1
        pool.connecting += 1
        try:
            _, connection = await asyncio.wait_for(loop.create_connection(
                _Connection, hostname,
                port or (443 if scheme == 'https' else 80), ssl=tls,
                server_hostname=hostname if tls else None),
                max(0.0, deadline - loop.time()))
        except BaseException as exc:
            pool.open -= 1
            pool.connecting -= 1
            pool.wake()
            if isinstance(exc, asyncio.TimeoutError):
                raise TimeoutError('timed out: no connection in %s s'
                                   % self._timeout) from None
            raise
        connection.new = True
        return connection

    async def _exchange(self, origin, connection, data, deadline):
        loop = asyncio.get_running_loop()
        answer = connection.send(data, loop)
        late = loop.call_at(min(loop.time() + self._timeout, deadline),
                            _expire, answer,
                            'no answer in %s s' % self._timeout)
        try:
            status, keep = await answer
        except BaseException:
            self._pool(origin).closed(connection)
            raise
        finally:
            late.cancel()
            if connection.new:
                connection.new = False
                pool = self._pool(origin)
                pool.connecting -= 1
                pool.wake()
        if keep and not connection.closed:
            self._give_back(origin, connection)
        else:
            self._pool(origin).closed(connection)
        return status

    def _give_back(self, origin, connection):
        pool = self._pool(origin)
        pool.idle.append(connection)
        self._idle_count += 1
        pool.wake()
        while self._idle_count > IDLE_CONNECTIONS:
            oldest = next(pool for pool in self._pools.values()
                          if pool.idle)
            oldest.closed(oldest.idle.pop(0))
            self._idle_count -= 1
        if len(self._pools) > 2 * IDLE_CONNECTIONS:
            for origin in [origin for origin, pool in self._pools.items()
                           if pool.unused()]:
                del self._pools[origin]


def _expire(future, what):
    if not future.done():
        future.set_exception(TimeoutError('timed out: ' + what))
