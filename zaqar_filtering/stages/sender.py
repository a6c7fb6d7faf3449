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

"""How the notifier hands deliveries over, per subscriber URI scheme.

Webhooks go to a separate delivery process: delivery threads in the API
server's process would compete with its request thread for the GIL and
slow every request down as the fan-out grows. When the policy store keeps
a delivery ledger, a post records its deliveries there and wakes the
process up (:class:`LedgerSender`, :mod:`zaqar_filtering.delivery`);
otherwise it hands the process one batch: the matching subscriptions that
get the same messages, with those messages (:class:`ProcessSender`).
Other schemes (mailto, trust+) run Zaqar's own tasks on a thread pool, as
the stock notifier does.
"""

import json
import logging as std_logging
import multiprocessing
import os
import queue as queue_module
import sys
import threading
import time

from concurrent import futures
from oslo_log import log as logging

from zaqar_filtering.delivery import ledger
from zaqar_filtering.policy import retry
from zaqar_filtering.stages import webhook
from zaqar_filtering.store.base import StoreUnavailable

LOG = logging.getLogger(__name__)

#: Seconds the delivery process waits for work before checking that the
#: server that started it is still alive.
PARENT_CHECK_SECONDS = 1.0


class ThreadSender:
    """Runs a Zaqar delivery task on a thread pool.

    :param task: a ``zaqar.notification.tasks`` object.
    :param executor: a ``concurrent.futures`` executor.
    :param conf: the configuration the task reads.
    """

    def __init__(self, task, executor, conf):
        self._task = task
        self._executor = executor
        self._conf = conf

    def send(self, subscriptions, notifications, retry_policy, project=None):
        """Start delivering the notifications to each subscription."""
        for subscription in subscriptions:
            # Zaqar's tasks add fields to the messages they send.
            self._executor.submit(self._task.execute, subscription,
                                  [dict(n) for n in notifications],
                                  conf=self._conf,
                                  queue_retry_policy=retry_policy)


class DeliveryProcess:
    """This server's delivery process, started on first use.

    :param target: its main function; called with a
        ``multiprocessing.Queue`` of work, then ``args``, then this
        process's pid (it exits once that process is gone).
    """

    def __init__(self, target, args):
        self._target = target
        self._args = tuple(args)
        self._context = multiprocessing.get_context('spawn')
        python = _python()
        if python != sys.executable:
            # Under uWSGI or mod_wsgi, sys.executable is not Python.
            self._context.set_executable(python)
        self._lock = threading.Lock()
        self._process = None
        self._queue = None

    def put(self, item):
        """Hand ``item`` over, starting the process if it is not running."""
        with self._lock:
            self._ensure_started()
            self._queue.put(item)

    def start(self):
        """Start the process now if it is not running."""
        with self._lock:
            self._ensure_started()

    @property
    def pid(self):
        """The process's pid, or None before it started."""
        return self._process.pid if self._process is not None else None

    def is_alive(self):
        """Return whether the process is running."""
        return self._process is not None and self._process.is_alive()

    def close(self):
        """Let the process finish its work and exit."""
        with self._lock:
            if self._process is not None and self._process.is_alive():
                self._queue.put(None)
                self._process.join()
            self._process = None

    def _ensure_started(self):
        if self._process is not None and self._process.is_alive():
            return
        if self._process is not None:
            LOG.error('The webhook delivery process %d exited with code %s; '
                      'starting a new one', self._process.pid,
                      self._process.exitcode)
        self._queue = self._context.Queue()
        self._process = self._context.Process(
            target=self._target,
            args=(self._queue,) + self._args + (os.getpid(),),
            name='zaqar-filtering-webhooks', daemon=True)
        self._process.start()
        LOG.info('Started the webhook delivery process %d',
                 self._process.pid)


class ProcessSender:
    """Runs webhook deliveries in a delivery process, without a ledger.

    For stores that keep no delivery ledger: retries are sleeps in the
    delivery process, lost if it stops.

    :param workers: delivery threads in that process.
    :param timeout: seconds each request may wait (connect, then answer).
    """

    def __init__(self, workers, timeout):
        #: The :class:`DeliveryProcess`.
        self.process = DeliveryProcess(serve, (workers, timeout))

    def send(self, subscriptions, notifications, retry_policy, project=None):
        """Queue the notifications for each subscription."""
        self.process.put((subscriptions, notifications, retry_policy))

    def close(self):
        """Let the delivery process finish its work and exit."""
        self.process.close()


class LedgerSender:
    """Records webhook deliveries in the ledger for the delivery process.

    A post returns once its deliveries are recorded: from then on a
    restart loses none of them. While the ledger cannot be reached, posts
    still go out: the delivery process delivers them unrecorded, with
    in-process retries on Zaqar's schedule, as without a ledger.

    :param ledger: a :class:`~zaqar_filtering.delivery.ledger.Ledger`.
    :param process: the :class:`DeliveryProcess` that posts them, woken
        up for each batch.
    :param lifecycle_seconds: how long after its publication a message
        may still be delivered.
    """

    #: What wakes the delivery process up.
    WAKE = 'wake'

    def __init__(self, ledger, process, lifecycle_seconds):
        self._ledger = ledger
        #: The :class:`DeliveryProcess`.
        self.process = process
        self._lifecycle = lifecycle_seconds
        self._unrecorded = False

    def send(self, subscriptions, notifications, retry_policy, project=None):
        """Record a delivery of each notification to each subscription."""
        now = time.time()
        # What subscriptions share is encoded once. Most have no post_data
        # template, post_headers or retry policy of their own: they share
        # the first of each.
        parts = {'bodies': {}, 'headers': {}, 'policies': {}}

        def index(kind, key, make):
            found = parts[kind].get(key)
            if found is None:
                found = parts[kind][key] = (len(parts[kind]), make())
            return found[0]

        shared = None
        targets = []
        for subscription in subscriptions:
            options = subscription['options'] or {}
            own = not _OWN_DELIVERY_OPTIONS.isdisjoint(options)
            if not own and shared is not None:
                targets.append(ledger.Target(
                    str(subscription['id']), subscription['subscriber'],
                    *shared))
                continue
            policy = retry.effective_policy(options.get(retry.OPTION),
                                            retry_policy)
            headers = webhook.payload_headers(subscription)
            target = ledger.Target(
                str(subscription['id']), subscription['subscriber'],
                retry.strategy_of(policy),
                index('bodies', options.get('post_data'), lambda: tuple(
                    webhook.payload(subscription, n)[0]
                    for n in notifications)),
                index('headers', _key(headers), lambda: headers),
                index('policies', _key(policy), lambda: policy))
            if not own:
                shared = target[2:]
            targets.append(target)
        batch = ledger.Batch(
            project=project, queue=subscriptions[0]['source'],
            published=now, deadline=now + self._lifecycle,
            targets=tuple(targets),
            **{kind: tuple(made for _, made in sorted(found.values()))
               for kind, found in parts.items()})
        try:
            self._ledger.enqueue(batch)
        except StoreUnavailable as exc:
            if not self._unrecorded:
                LOG.warning('Delivering webhooks unrecorded, with retries '
                            'that a restart loses, until the delivery ledger '
                            'is back: %s', exc)
            self._unrecorded = True
            self.process.put((subscriptions, notifications, retry_policy))
            return
        if self._unrecorded:
            LOG.warning('The delivery ledger is back: webhook deliveries are '
                        'recorded again')
            self._unrecorded = False
        self.process.put(self.WAKE)

    def start(self):
        """Start the delivery process now (it resumes pending retries)."""
        self.process.start()

    def close(self):
        """Let the delivery process finish its work and exit."""
        self.process.close()


#: Subscription options that make its deliveries differ from the others'.
_OWN_DELIVERY_OPTIONS = frozenset(['post_data', 'post_headers', retry.OPTION])


def _key(value):
    return json.dumps(value, sort_keys=True)


def _python():
    """Return the Python interpreter of this environment."""
    if os.path.basename(sys.executable).startswith('python'):
        return sys.executable
    for name in ('python3', 'python'):
        candidate = os.path.join(sys.exec_prefix, 'bin', name)
        if os.access(candidate, os.X_OK):
            return candidate
    return sys.executable


def serve(work, workers, timeout, parent_pid):
    """Deliver batches until told to stop or until the server is gone.

    The main function of the delivery process of a :class:`ProcessSender`.
    """
    std_logging.basicConfig(
        level=std_logging.INFO,
        format='%(asctime)s %(process)d %(levelname)s %(name)s %(message)s')
    task = webhook.load_tasks(timeout)
    executor = futures.ThreadPoolExecutor(max_workers=workers)
    while True:
        try:
            batch = work.get(timeout=PARENT_CHECK_SECONDS)
        except queue_module.Empty:
            if os.getppid() != parent_pid:
                break
            continue
        if batch is None:
            break
        subscriptions, notifications, retry_policy = batch
        for subscription in subscriptions:
            executor.submit(task.execute, subscription, notifications,
                            queue_retry_policy=retry_policy)
    executor.shutdown(wait=True)
