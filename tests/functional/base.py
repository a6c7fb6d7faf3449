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

"""Real processes for the functional tests.

Everything listens on 127.0.0.1 on free ports and is stopped by PID:

* :class:`RedisServer`: a ``redis-server`` from ``PATH`` (``make test``
  installs it), without persistence;
* :func:`write_zaqar_conf`: a zaqar.conf for a redis message store and a
  SQLite management store (schema created here), with no auth and no
  pooling, plus the overrides a test class asks for;
* :class:`ZaqarServer`: ``zaqar-filtering-server --config-file ...`` from
  the virtualenv of the running Python, ready once ``GET /v2/ping`` is 204;
* :class:`WebhookReceiver`: an HTTP/1.1 keep-alive server in a thread that
  records each request and can wait for them;
* :class:`Client`: ``requests`` with the ``Client-ID`` and ``X-Project-ID``
  headers Zaqar needs.

:class:`ServerTestCase` starts one redis, one receiver and one server per
test class (``setUpClass``); each test gets its own queue name. For
example::

    class NotifierTest(base.ServerTestCase):
        CONF_OVERRIDES = {
            'storage': {'message_pipeline': 'zaqar_filtering.notifier'},
        }

        def test_delivery(self):
            self.client.subscribe(self.queue, self.receiver.url(self.queue))
            self.client.post_messages(self.queue, [{'body': 1}])
            [request] = self.receiver.wait_for(1, self.queue)

Set ``ZAQAR_FILTERING_KEEP_WORKDIR=1`` to keep the temporary directory
(configuration, logs) of each class for a look after the run.
"""

import collections
import ctypes
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import uuid

import msgpack
import redis
import requests

HOST = '127.0.0.1'
START_TIMEOUT = 30
STOP_TIMEOUT = 10
WAIT_TIMEOUT = 15

REDIS_MISSING = (
    'redis-server is not on PATH (%s). The functional tests run a real '
    'redis-server: "make test" installs it (make services), or install it '
    'with "apt-get install redis-server".')


def wait_until(condition, timeout=WAIT_TIMEOUT):
    """Wait until ``condition()`` is true; fail the test after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError('timed out after %s s waiting for %s'
                                 % (timeout, condition))
        time.sleep(0.02)


def free_port():
    """Return a TCP port that is free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def venv_script(name):
    """Return the path of a console script installed beside this Python."""
    path = os.path.join(os.path.dirname(sys.executable), name)
    if not os.access(path, os.X_OK):
        raise RuntimeError('%s is not installed next to %s; reinstall the '
                           'package (make venv).' % (name, sys.executable))
    return path


# prctl(PR_SET_PDEATHSIG) is looked up before any fork: a child of a
# threaded process should do as little as possible before exec.
_PR_SET_PDEATHSIG = 1
_prctl = (ctypes.CDLL(None, use_errno=True).prctl
          if sys.platform.startswith('linux') else None)


def _die_with_parent():
    # The child gets SIGTERM when the test process dies first, so a killed
    # test run leaves no server behind. Linux ties this to the thread that
    # started the child: start servers from a thread that outlives them
    # (setUpClass and setUp run in the main thread).
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Process:
    """A child process whose output goes to a log file."""

    def __init__(self, name, argv, log_path, env=None):
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.popen = None

    @property
    def pid(self):
        return self.popen.pid if self.popen else None

    def start(self):
        with open(self.log_path, 'ab') as log:
            self.popen = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=self.env,
                preexec_fn=_die_with_parent if _prctl else None)
        return self

    def running(self):
        return self.popen is not None and self.popen.poll() is None

    def log_tail(self, lines=30):
        try:
            with open(self.log_path, 'rb') as log:
                text = log.read().decode('utf-8', 'replace')
        except OSError:
            return ''
        return '\n'.join(text.splitlines()[-lines:])

    def wait_until(self, ready, timeout=START_TIMEOUT):
        """Wait until ``ready()`` is true; fail if the process exits."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.running():
                raise RuntimeError(
                    '%s exited with status %s before it was ready:\n%s' % (
                        self.name, self.popen.returncode, self.log_tail()))
            if ready():
                return
            if time.monotonic() > deadline:
                raise RuntimeError('%s (pid %d) was not ready after %d s:\n%s'
                                   % (self.name, self.pid, timeout,
                                      self.log_tail()))
            time.sleep(0.05)

    def stop(self, timeout=STOP_TIMEOUT):
        """Terminate the process, and kill it if it does not exit.

        Its own children (a server's webhook delivery process) exit by
        themselves soon after it; those still there after ``timeout`` are
        terminated.
        """
        if self.popen is None or self.popen.poll() is not None:
            return
        children = children_of(self.popen.pid)
        self.popen.terminate()
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout)
        deadline = time.monotonic() + timeout
        while children and time.monotonic() < deadline:
            children = {pid for pid in children
                        if os.path.exists('/proc/%d' % pid)}
            time.sleep(0.05)
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass


def children_of(pid):
    """Return the PIDs of a process's children (Linux ``/proc``)."""
    pids = set()
    try:
        tasks = os.listdir('/proc/%d/task' % pid)
    except OSError:
        return pids
    for task in tasks:
        try:
            with open('/proc/%d/task/%s/children' % (pid, task)) as f:
                pids.update(int(child) for child in f.read().split())
        except OSError:
            pass
    return pids


class RedisServer(Process):
    """A ``redis-server`` without persistence on a free port."""

    def __init__(self, workdir):
        binary = shutil.which('redis-server')
        if binary is None:
            raise RuntimeError(REDIS_MISSING % os.environ.get('PATH', ''))
        self.port = free_port()
        super().__init__(
            'redis-server',
            [binary, '--port', str(self.port), '--bind', HOST,
             '--save', '', '--appendonly', 'no', '--daemonize', 'no',
             '--dir', workdir],
            os.path.join(workdir, 'redis.log'))

    @property
    def uri(self):
        return 'redis://%s:%d' % (HOST, self.port)

    def ping(self):
        try:
            with socket.create_connection((HOST, self.port), 1) as sock:
                sock.sendall(b'PING\r\n')
                return sock.recv(64).startswith(b'+PONG')
        except OSError:
            return False

    def start(self):
        super().start()
        self.wait_until(self.ping)
        return self

    def seed_subscriptions(self, project, queue, subscriptions, ttl=3600):
        """Write subscriptions straight into Zaqar's redis schema.

        Creating one through Zaqar's API lists the queue's others, so a
        large queue is seeded here instead. Nothing tells a running
        server: seed before its first post, or change one subscription
        through the API afterwards.

        :param subscriptions: ``(subscriber URL, options)`` pairs.
        """
        client = redis.Redis(host=HOST, port=self.port)
        pack = msgpack.Packer(use_bin_type=True).pack
        now = int(time.time())
        try:
            with client.pipeline(transaction=False) as pipe:
                for subscriber, options in subscriptions:
                    sub_id = str(uuid.uuid4())
                    pipe.zadd('%s.%s.subscriptions' % (project, queue),
                              {sub_id: 1})
                    pipe.hset(sub_id, mapping={
                        'id': sub_id, 's': queue, 'u': subscriber, 't': ttl,
                        'e': now + ttl, 'o': pack(options), 'p': project,
                        'c': 1})
                    pipe.expire(sub_id, ttl)
                pipe.execute()
        finally:
            client.close()


def create_sqlite_schema(path):
    """Create the tables of Zaqar's SQLAlchemy management store.

    ``zaqar-sql-db-manage upgrade`` does not work on SQLite.
    """
    import sqlalchemy
    from zaqar.storage.sqlalchemy import tables

    engine = sqlalchemy.create_engine('sqlite:///' + path)
    try:
        tables.metadata.create_all(engine)
    finally:
        engine.dispose()


def write_zaqar_conf(workdir, redis_uri, port, overrides=None,
                     name='zaqar.conf'):
    """Write a zaqar.conf into ``workdir`` and return its path.

    :param overrides: ``{section: {option: value}}`` merged over the base
        configuration; a value of None removes the option.
    """
    db_path = os.path.join(workdir, 'zaqar.db')
    if not os.path.exists(db_path):
        create_sqlite_schema(db_path)
    sections = {
        'DEFAULT': {'auth_strategy': '', 'pooling': 'False',
                    'debug': 'False'},
        'drivers': {'transport': 'wsgi', 'message_store': 'redis',
                    'management_store': 'sqlalchemy'},
        'drivers:message_store:redis': {'uri': redis_uri},
        'drivers:management_store:sqlalchemy': {
            'uri': 'sqlite:///' + db_path},
        'drivers:transport:wsgi': {'bind': HOST, 'port': str(port)},
        # A reachable profiler store keeps osprofiler from logging errors
        # at start-up; profiling itself stays off.
        'profiler': {'connection_string': redis_uri},
    }
    for section, options in (overrides or {}).items():
        merged = sections.setdefault(section, {})
        for option, value in options.items():
            if value is None:
                merged.pop(option, None)
            else:
                merged[option] = str(value)
    return write_ini(os.path.join(workdir, name), sections)


def write_ini(path, sections):
    """Write ``{section: {option: value}}`` as an ini file; return path."""
    with open(path, 'w') as conf:
        for section, options in sections.items():
            conf.write('[%s]\n' % section)
            for option, value in options.items():
                conf.write('%s = %s\n' % (option, value))
            conf.write('\n')
    return path


class ZaqarServer(Process):
    """An HTTP server of Zaqar's API, by default ``zaqar-filtering-server``.

    :param argv: another command serving the API on ``port``; by default
        ``zaqar-filtering-server --config-file conf_path``.
    """

    def __init__(self, conf_path, port, log_path, argv=None, env=None,
                 name='zaqar-filtering-server'):
        self.port = port
        self.conf_path = conf_path
        if argv is None:
            argv = [venv_script('zaqar-filtering-server'),
                    '--config-file', conf_path]
        super().__init__(name, argv, log_path, env=env)

    @property
    def url(self):
        return 'http://%s:%d' % (HOST, self.port)

    def ping(self):
        try:
            response = requests.get(self.url + '/v2/ping', timeout=2,
                                    headers={'Client-ID': str(uuid.uuid4()),
                                             'X-Project-ID': 'ping'})
        except requests.RequestException:
            return False
        if 400 <= response.status_code < 500:
            raise RuntimeError('%s answered GET /v2/ping with %d: %s' % (
                self.name, response.status_code, response.text))
        return response.status_code == 204

    def start(self):
        super().start()
        self.wait_until(self.ping)
        return self


#: A request the receiver got, the status it answered, and when it came
#: (time.monotonic()).
Request = collections.namedtuple('Request',
                                 'path headers body json peer status time')


class _ReceiverHandler(http.server.BaseHTTPRequestHandler):
    # Keep-alive needs HTTP/1.1 and a Content-Length on every response.
    protocol_version = 'HTTP/1.1'

    def do_POST(self):
        length = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(length)
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        received = time.monotonic()
        receiver = self.server.receiver
        status, delay = receiver.answer_for(self.path, document)
        if delay:
            time.sleep(delay)
        receiver.record(Request(self.path, dict(self.headers), body,
                                document, self.client_address, status,
                                received))
        self.send_response(status)
        self.send_header('Content-Length', '0')
        if self.path.startswith('/close/'):
            self.send_header('Connection', 'close')
            self.close_connection = True
        self.end_headers()

    do_PUT = do_POST

    def log_message(self, *args):
        pass


class WebhookReceiver:
    """An HTTP server in a thread that records the requests it gets.

    It answers 200, or ``<code>`` for paths under ``/status/<code>/``, and
    closes the connection after answering a path under ``/close/``.
    :meth:`fail` makes it fail on purpose until :meth:`recover`.
    """

    def __init__(self):
        self._failing = {}
        self._requests = []
        self._changed = threading.Condition()
        self._server = http.server.ThreadingHTTPServer(
            (HOST, 0), _ReceiverHandler)
        self._server.daemon_threads = True
        self._server.receiver = self
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name='webhook-receiver', daemon=True)

    @property
    def port(self):
        return self._server.server_address[1]

    def url(self, path=''):
        """Return the URL of ``path`` (with or without a leading slash)."""
        return 'http://%s:%d/%s' % (HOST, self.port, path.lstrip('/'))

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(STOP_TIMEOUT)

    def fail(self, prefix, status=500, when=None, delay=0):
        """Fail requests under ``/prefix`` until :meth:`recover`.

        :param status: the answer.
        :param when: fail only the requests whose JSON body it accepts.
        :param delay: seconds to wait before answering (past the delivery
            timeout, the request times out).
        """
        with self._changed:
            self._failing['/' + prefix.lstrip('/')] = (status, when, delay)

    def recover(self, prefix):
        """Answer requests under ``/prefix`` normally again."""
        with self._changed:
            self._failing.pop('/' + prefix.lstrip('/'), None)

    def answer_for(self, path, document):
        """Return the status to answer a request with, and a delay."""
        with self._changed:
            failing = list(self._failing.items())
        for prefix, (status, when, delay) in failing:
            if path.startswith(prefix) and (when is None or when(document)):
                return status, delay
        return self.status_for(path), 0

    @staticmethod
    def status_for(path):
        parts = path.split('/')
        if len(parts) > 2 and parts[1] == 'status' and parts[2].isdigit():
            return int(parts[2])
        return 200

    def record(self, request):
        with self._changed:
            self._requests.append(request)
            self._changed.notify_all()

    def requests(self, prefix='', status=None):
        """Return the requests so far whose path starts with ``/prefix``.

        :param status: only those answered with this status.
        """
        prefix = '/' + prefix.lstrip('/')
        with self._changed:
            return [r for r in self._requests if r.path.startswith(prefix)
                    and status in (None, r.status)]

    def wait_for(self, count, prefix='', timeout=WAIT_TIMEOUT, status=None):
        """Wait for ``count`` requests under ``/prefix`` and return them.

        :param status: count only those answered with this status.
        :raises AssertionError: if fewer arrive within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = self.requests(prefix, status)
                if len(found) >= count:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        'expected %d requests under /%s within %s s, got '
                        '%d: %s' % (count, prefix.lstrip('/'), timeout,
                                    len(found), [r.path for r in found]))
                self._changed.wait(remaining)


class Client:
    """A client of Zaqar's v2 API for one project and one client ID."""

    def __init__(self, base_url, project='zaqar-filtering-tests',
                 client_id=None, timeout=WAIT_TIMEOUT):
        self.base_url = base_url.rstrip('/')
        self.project = project
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers.update({
            'Client-ID': str(client_id or uuid.uuid4()),
            'X-Project-ID': project,
        })

    def close(self):
        self.session.close()

    def request(self, method, path, **kwargs):
        kwargs.setdefault('timeout', self.timeout)
        return self.session.request(method, self.base_url + path, **kwargs)

    def get(self, path, **kwargs):
        return self.request('GET', path, **kwargs)

    def post(self, path, **kwargs):
        return self.request('POST', path, **kwargs)

    def put(self, path, **kwargs):
        return self.request('PUT', path, **kwargs)

    def patch(self, path, **kwargs):
        return self.request('PATCH', path, **kwargs)

    def delete(self, path, **kwargs):
        return self.request('DELETE', path, **kwargs)

    def create_queue(self, queue, metadata=None):
        return self.put('/v2/queues/%s' % queue, json=metadata or {})

    def subscribe(self, queue, subscriber, options=None, ttl=3600):
        """Create a subscription; return the response."""
        return self.post('/v2/queues/%s/subscriptions' % queue,
                         json={'subscriber': subscriber, 'ttl': ttl,
                               'options': options or {}})

    def post_messages(self, queue, messages, **kwargs):
        return self.post('/v2/queues/%s/messages' % queue,
                         json={'messages': messages}, **kwargs)

    def messages(self, queue):
        """Return the messages stored in ``queue`` (up to 20)."""
        response = self.get('/v2/queues/%s/messages' % queue,
                            params={'echo': 'true', 'limit': 20})
        if response.status_code == 204:
            return []
        response.raise_for_status()
        return response.json()['messages']

    def total_messages(self, queue):
        """Return the queue's message count from its stats."""
        response = self.get('/v2/queues/%s/stats' % queue)
        response.raise_for_status()
        return response.json()['messages']['total']


class ServerTestCase(unittest.TestCase):
    """One redis, one webhook receiver and one Zaqar server per class.

    ``CONF_OVERRIDES`` (``{section: {option: value}}``) is merged over the
    base zaqar.conf of :func:`write_zaqar_conf`. Each test gets
    ``self.queue``, a queue name of its own, and ``self.client``.
    """

    CONF_OVERRIDES = {}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.workdir = tempfile.mkdtemp(prefix='zaqar-filtering-functional-')
        if not os.environ.get('ZAQAR_FILTERING_KEEP_WORKDIR'):
            cls.addClassCleanup(shutil.rmtree, cls.workdir,
                                ignore_errors=True)
        cls.redis = RedisServer(cls.workdir)
        cls.addClassCleanup(cls.redis.stop)
        cls.redis.start()
        cls.receiver = WebhookReceiver().start()
        cls.addClassCleanup(cls.receiver.stop)
        cls.zaqar = cls.start_zaqar(cls.CONF_OVERRIDES)

    @classmethod
    def start_zaqar(cls, overrides=None, name='zaqar'):
        """Start another server on the class's redis; stopped after it."""
        port = free_port()
        conf_path = write_zaqar_conf(cls.workdir, cls.redis.uri, port,
                                     overrides, name=name + '.conf')
        server = ZaqarServer(conf_path, port,
                             os.path.join(cls.workdir, name + '.log'))
        cls.addClassCleanup(server.stop)
        return server.start()

    def setUp(self):
        super().setUp()
        # Queue names: at most 64 of [a-zA-Z0-9_-].
        self.queue = 'q-%s-%s' % (self._testMethodName[5:][:30],
                                  uuid.uuid4().hex[:8])
        self.client = Client(self.zaqar.url)
        self.addCleanup(self.client.close)
