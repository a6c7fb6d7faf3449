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

"""Webhook delivery with keep-alive connections and timeouts.

Registered as the ``http`` and ``https`` tasks of the
``zaqar_filtering.notification.tasks`` namespace.
:meth:`WebhookTask.attempt_async` posts once, on the delivery process's
event loop (:mod:`zaqar_filtering.delivery.http_client`), and counts any
non-2xx answer as a failure; the delivery ledger's dispatcher retries per
the subscription's notify strategy (:mod:`zaqar_filtering.delivery`).

Zaqar's own webhook task posts with a new connection and no timeout for
every message, and mutates the messages it sends. :meth:`WebhookTask.
execute`, Zaqar's task interface for stores without a delivery ledger,
keeps its retry schedule (the subscription's or the queue's
``_retry_policy``) and its payload, ``post_data`` and ``post_headers``
handling, but posts over persistent ``http.client`` connections kept per
thread (it runs in Zaqar's notifier threads), always with a timeout, on
copies of the messages. It retries a request that failed or got a 5xx
answer, which is what the stock task means to do.
"""

import base64
import collections
import functools
import http.client
import ssl
import threading
from urllib import parse as urllib_parse

from oslo_log import log as logging
from oslo_serialization import jsonutils
import stevedore
from zaqar.notification.tasks import webhook

from zaqar_filtering.delivery import http_client

LOG = logging.getLogger(__name__)

#: Our delivery tasks, by URI scheme.
TASKS_NAMESPACE = 'zaqar_filtering.notification.tasks'

#: Open connections each delivery thread keeps, least recently used first
#: to go.
CONNECTIONS_PER_THREAD = 32

# A kept-alive connection that the subscriber closed in the meantime fails
# like this on its next request; it is retried once on a new connection.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError,
          ConnectionResetError)


def payload(subscription, message, headers=None):
    """Return the request body and headers that deliver ``message``.

    As Zaqar's task builds them: the message with its ``queue_name``, put
    in the subscription's ``post_data`` template if it has one, and the
    subscription's ``post_headers`` over ``headers``.
    """
    options = subscription['options'] or {}
    data = jsonutils.dumps(dict(message, queue_name=subscription['source']))
    if 'post_data' in options:
        data = options['post_data'].replace('"$zaqar_message$"', data)
    return data, payload_headers(subscription, headers)


def payload_headers(subscription, headers=None):
    """Return the request headers of the subscription's deliveries."""
    headers = dict(headers or {'Content-Type': 'application/json'})
    headers.update((subscription['options'] or {}).get('post_headers', {}))
    return headers


class WebhookTask(webhook.WebhookTask):
    """Delivers notifications to ``http`` and ``https`` subscribers.

    :param timeout: seconds to wait for a connection and for an answer.
    :param conf: unused (the signature of the delivery tasks).
    """

    def __init__(self, timeout, conf=None):
        self._timeout = timeout
        self._local = threading.local()
        self._tls = ssl.create_default_context()
        self._client = None

    def execute(self, subscription, messages, headers=None, **kwargs):
        """Post each message; retry per the retry policy on failure.

        This is Zaqar's task interface, for deployments whose store keeps
        no delivery ledger: the retries are sleeps in this thread.
        """
        options = subscription['options'] or {}
        for message in messages:
            data, post_headers = payload(subscription, message, headers)
            if not self._post(subscription['subscriber'], data,
                              post_headers, retried=False):
                self._retry_post(options.get('_retry_policy', {}),
                                 kwargs.get('queue_retry_policy') or {},
                                 subscription['subscriber'], data,
                                 post_headers)

    async def attempt_async(self, subscriber, data, headers, project=None):
        """Post once; return None on a 2xx answer, else what went wrong.

        On the running event loop, over connections kept per origin.
        """
        try:
            (scheme, host, port, netloc), target, auth = _target(subscriber)
            if auth:
                headers = dict(headers, Authorization=auth)
            if self._client is None:
                self._client = http_client.Client(self._timeout, self._tls)
            status = await self._client.post(
                (scheme, host, port), target, netloc, data.encode('utf-8'),
                headers)
        except (OSError, http_client.ProtocolError, ValueError) as exc:
            return '%s: %s' % (type(exc).__name__, exc or repr(exc))
        if 200 <= status < 300:
            return None
        return 'HTTP %d' % status

    async def close_async(self):
        """Close the connections :meth:`attempt_async` keeps."""
        if self._client is not None:
            self._client.close()

    def _post_request_success(self, subscriber, data, headers):
        # Called by the inherited retry schedule.
        return self._post(subscriber, data, headers, retried=True)

    def _post(self, subscriber, data, headers, retried):
        """Return False when the post should be retried."""
        try:
            status = self._request(subscriber, data.encode('utf-8'), headers)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            LOG.warning('Posting to %(subscriber)s failed%(again)s: %(exc)s',
                        {'subscriber': subscriber, 'exc': exc or repr(exc),
                         'again': ' again' if retried else ''})
            return False
        if status >= 500:
            LOG.warning('Posting to %(subscriber)s got HTTP %(status)d',
                        {'subscriber': subscriber, 'status': status})
            return False
        if status >= 400:
            # As the stock task does: a client error is not retried.
            LOG.warning('Posting to %(subscriber)s got HTTP %(status)d; '
                        'not retried', {'subscriber': subscriber,
                                        'status': status})
        return True

    def _request(self, subscriber, body, headers):
        (scheme, host, port, _), path, auth = _target(subscriber)
        if auth:
            headers = dict(headers, Authorization=auth)
        key = (scheme, host, port)
        connection, reused = self._connection(key)
        try:
            connection.request('POST', path, body=body, headers=headers)
            response = connection.getresponse()
        except _STALE:
            self._close(key)
            if not reused:
                raise
            connection, _ = self._connection(key)
            connection.request('POST', path, body=body, headers=headers)
            response = connection.getresponse()
        except BaseException:
            self._close(key)
            raise
        response.read()
        if response.will_close:
            self._close(key)
        return response.status

    def _connection(self, key):
        """Return this thread's connection to ``key``, and if it was open."""
        connections = getattr(self._local, 'connections', None)
        if connections is None:
            connections = self._local.connections = collections.OrderedDict()
        connection = connections.get(key)
        if connection is not None:
            connections.move_to_end(key)
            return connection, True
        scheme, host, port = key
        if scheme == 'https':
            connection = http.client.HTTPSConnection(
                host, port, timeout=self._timeout, context=self._tls)
        else:
            connection = http.client.HTTPConnection(host, port,
                                                    timeout=self._timeout)
        connections[key] = connection
        while len(connections) > CONNECTIONS_PER_THREAD:
            connections.popitem(last=False)[1].close()
        return connection, False

    def _close(self, key):
        connection = self._local.connections.pop(key, None)
        if connection is not None:
            connection.close()


@functools.lru_cache(maxsize=16384)
def _target(subscriber):
    """Return ``((scheme, host, port, netloc), target, authorization)``.

    :raises ValueError: not an http(s) URL.
    """
    url = urllib_parse.urlsplit(subscriber)
    if url.scheme not in ('http', 'https') or not url.hostname:
        raise ValueError('not an http(s) URL: %s' % subscriber)
    target = (url.path or '/') + ('?' + url.query if url.query else '')
    auth = None
    if url.username is not None:
        credentials = '%s:%s' % (urllib_parse.unquote(url.username),
                                 urllib_parse.unquote(url.password or ''))
        auth = 'Basic ' + base64.b64encode(
            credentials.encode('utf-8')).decode('ascii')
    netloc = url.netloc.rpartition('@')[2]
    return (url.scheme, url.hostname, url.port, netloc), target, auth


class SchemeTasks:
    """The tasks of :data:`TASKS_NAMESPACE`, each for its URI scheme.

    A task attempts one delivery with ``attempt_async`` (a coroutine, on
    the delivery process's event loop) or ``attempt`` (which may block);
    either takes ``(subscriber, data, headers, project=None)`` and
    returns None on success, else what went wrong as text. ``project`` is
    the subscription's, for the tasks that deliver inside Zaqar
    (``queue:``).
    """

    def __init__(self, tasks):
        self._tasks = tasks

    def task_for(self, subscriber):
        """Return the task of the subscriber's scheme.

        :raises ValueError: no task has that scheme.
        """
        scheme = urllib_parse.urlsplit(subscriber).scheme
        try:
            return self._tasks[scheme]
        except KeyError:
            raise ValueError('no delivery task for the scheme %r of %s in '
                             '%s' % (scheme, subscriber, TASKS_NAMESPACE))

    def all(self):
        """Return each task once."""
        return list({id(task): task for task in self._tasks.values()}
                    .values())

    def execute(self, subscription, messages, **kwargs):
        """Deliver with retries (see WebhookTask.execute)."""
        self.task_for(subscription['subscriber']).execute(
            subscription, messages, **kwargs)


def load_tasks(timeout, conf=None):
    """Load our delivery tasks once, as a :class:`SchemeTasks`.

    :param conf: zaqar.conf, for the tasks that deliver inside Zaqar.
    """
    manager = stevedore.ExtensionManager(
        TASKS_NAMESPACE, invoke_on_load=True,
        invoke_kwds={'timeout': timeout, 'conf': conf},
        on_load_failure_callback=_task_failed)
    if not manager.names():
        raise RuntimeError('No delivery task found in the entry point '
                           'namespace %s: is zaqar-filtering installed?'
                           % TASKS_NAMESPACE)
    return SchemeTasks({extension.name: extension.obj
                        for extension in manager})


def _task_failed(manager, entry_point, exc):
    raise RuntimeError('Cannot load the delivery task %s of %s: %s'
                       % (entry_point.name, TASKS_NAMESPACE, exc)) from exc
