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

import dataclasses
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
from zaqar_filtering.policy.ordering import ORDERING_KEY
from zaqar_filtering.policy import retry
from zaqar_filtering.stages import webhook
from zaqar_filtering.store.base import StoreUnavailable

LOG = logging.getLogger(__name__)

#: Seconds the delivery process waits for work before checking that the
#: server that started it is still alive.
PARENT_CHECK_SECONDS = 1.0


class Sender:
    """What the notifier hands deliveries to, for some URI schemes.

    A post reaches the same subscriptions as many others before it, so the
    notifier has a sender :meth:`prepare` the deliveries to a set of
    subscriptions once, and :meth:`deliver` them the messages of each post.
    """

    def prepare(self, subscriptions, retry_policy):
        """Return what :meth:`deliver` needs of these subscriptions.

        :param retry_policy: the queue's ``_retry_policy``.
        """
        return list(subscriptions), retry_policy

    def deliver(self, prepared, notifications, project=None, ordered=False):
        """Deliver the notifications to the prepared subscriptions.

        :param ordered: whether the queue is ordered by key (only the
            delivery ledger keeps that order).
        """
        subscriptions, retry_policy = prepared
        self.send(subscriptions, notifications, retry_policy,
                  project=project)

    def send(self, subscriptions, notifications, retry_policy, project=None):
        """Deliver the notifications to each subscription."""
        raise NotImplementedError


class ThreadSender(Sender):
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
            # Zaqar's tasks add fields to the messages they send, and the
            # trust+ task rewrites the subscriber of the subscription.
            self._executor.submit(self._task.execute, dict(subscription),
                                  [dict(n) for n in notifications],
                                  conf=self._conf,
                                  queue_retry_policy=retry_policy)


class DeliveryProcess:
    """This server's delivery processes, started on first use.

    :param target: their main function; each is called with its own
        ``multiprocessing.Queue`` of work, then ``args``, then this
        process's pid (it exits once that process is gone).
    :param count: how many processes share the work.
    """

    #: What wakes a delivery process up.
    WAKE = 'wake'

    def __init__(self, target, args, count=1):
        self._target = target
        self._args = tuple(args)
        self._count = count
        self._context = multiprocessing.get_context('spawn')
        python = _python()
        if python != sys.executable:
            # Under uWSGI or mod_wsgi, sys.executable is not Python.
            self._context.set_executable(python)
        self._lock = threading.Lock()
        self._processes = [None] * count
        self._queues = [None] * count
        self._next = 0

    def put(self, item):
        """Hand ``item`` to one process, starting it if it is not running."""
        with self._lock:
            index = self._next
            self._next = (index + 1) % self._count
            self._ensure_started(index)
            self._queues[index].put(item)

    def wake(self):
        """Tell every process to look for work now."""
        with self._lock:
            for index in range(self._count):
                self._ensure_started(index)
                self._queues[index].put(self.WAKE)

    def start(self):
        """Start the processes that are not running."""
        with self._lock:
            for index in range(self._count):
                self._ensure_started(index)

    @property
    def pid(self):
        """The first process's pid, or None before it started."""
        return self.pids[0] if self.pids else None

    @property
    def pids(self):
        """The pids of the processes started."""
        return [p.pid for p in self._processes if p is not None]

    def is_alive(self):
        """Return whether every process is running."""
        return all(p is not None and p.is_alive() for p in self._processes)

    def close(self):
        """Let the processes finish their work and exit."""
        with self._lock:
            running = [(p, q) for p, q in zip(self._processes, self._queues)
                       if p is not None and p.is_alive()]
            for _, work in running:
                work.put(None)
            for process, _ in running:
                process.join()
            self._processes = [None] * self._count

    def _ensure_started(self, index):
        process = self._processes[index]
        if process is not None and process.is_alive():
            return
        if process is not None:
            LOG.error('The webhook delivery process %d exited with code %s; '
                      'starting a new one', process.pid, process.exitcode)
        work = self._queues[index] = self._context.Queue()
        process = self._processes[index] = self._context.Process(
            target=self._target,
            args=(work,) + self._args + (os.getpid(),),
            name='zaqar-filtering-webhooks-%d' % index, daemon=True)
        process.start()
        LOG.info('Started the webhook delivery process %d (%d of %d)',
                 process.pid, index + 1, self._count)


class ProcessSender(Sender):
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


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A :class:`LedgerSender`'s deliveries to some subscriptions.

    :ivar targets: :class:`~zaqar_filtering.delivery.ledger.Targets`.
    :ivar templates: for each bodies index of the targets, a subscription
        whose ``post_data`` template (or none) they follow.
    :ivar headers: request headers, by the targets' headers index.
    :ivar policies: retry policies, by the targets' policy index.
    """
    subscriptions: list
    retry_policy: dict
    targets: tuple
    templates: tuple
    headers: tuple
    policies: tuple


class LedgerSender(Sender):
    """Records webhook deliveries in the ledger for the delivery process.

    A post returns once its deliveries are recorded: from then on a
    restart loses none of them. While the ledger cannot be reached, posts
    still go out: the delivery process delivers them unrecorded, with
    in-process retries on Zaqar's schedule, as without a ledger.

    :param ledger: a :class:`~zaqar_filtering.delivery.ledger.Ledger`.
    :param process: the :class:`DeliveryProcess` whose processes post
        them, woken up for each batch.
    :param lifecycle_seconds: how long after its publication a message
        may still be delivered.
    """

    def __init__(self, ledger, process, lifecycle_seconds):
        self._ledger = ledger
        #: The :class:`DeliveryProcess`.
        self.process = process
        self._lifecycle = lifecycle_seconds
        self._unrecorded = False

    def prepare(self, subscriptions, retry_policy):
        """Return the :class:`Prepared` deliveries to ``subscriptions``.

        What each subscription gets but the messages: its target, its
        request headers and retry policy, which ``post_data`` template
        its bodies follow. What subscriptions share is kept once. Most
        have no ``post_data`` template, ``post_headers`` or retry policy
        of their own: they share the first of each.
        """
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
                index('bodies', options.get('post_data'),
                      lambda: subscription),
                index('headers', _key(headers), lambda: headers),
                index('policies', _key(policy), lambda: policy))
            if not own:
                shared = target[2:]
            targets.append(target)
        made = {kind: tuple(value for _, value in sorted(found.values()))
                for kind, found in parts.items()}
        return Prepared(list(subscriptions), retry_policy,
                        ledger.Targets(targets), made['bodies'],
                        made['headers'], made['policies'])

    def deliver(self, prepared, notifications, project=None, ordered=False):
        """Record a delivery of each notification to each subscription.

        :param ordered: whether the queue is ordered by key: then each
            subscription gets the notifications of a key in order.
        """
        if not prepared.targets:
            return
        now = time.time()
        batch = ledger.Batch(
            project=project, queue=prepared.subscriptions[0]['source'],
            published=now, deadline=now + self._lifecycle,
            bodies=tuple(tuple(webhook.payload(template, n)[0]
                               for n in notifications)
                         for template in prepared.templates),
            headers=prepared.headers, policies=prepared.policies,
            targets=prepared.targets,
            keys=(tuple(n.get(ORDERING_KEY) for n in notifications)
                  if ordered else ()))
        try:
            self._ledger.enqueue(batch)
        except StoreUnavailable as exc:
            if not self._unrecorded:
                LOG.warning('Delivering webhooks unrecorded, with retries '
                            'that a restart loses, until the delivery ledger '
                            'is back: %s', exc)
            self._unrecorded = True
            self.process.put((prepared.subscriptions, notifications,
                              prepared.retry_policy, project))
            return
        if self._unrecorded:
            LOG.warning('The delivery ledger is back: webhook deliveries are '
                        'recorded again')
            self._unrecorded = False
        if batch.size < LARGE_FAN_OUT:
            self.process.wake()
        else:
            # The request answers first: on a busy machine, the delivery
            # processes, the subscribers and the ledger working at once
            # would slow its last steps (Zaqar storing the messages).
            timer = threading.Timer(LARGE_FAN_OUT_WAKE_SECONDS,
                                    self.process.wake)
            timer.daemon = True
            timer.start()

    def send(self, subscriptions, notifications, retry_policy, project=None):
        """Record a delivery of each notification to each subscription."""
        self.deliver(self.prepare(subscriptions, retry_policy),
                     notifications, project=project)

    def start(self):
        """Start the delivery process now (it resumes pending retries)."""
        self.process.start()

    def close(self):
        """Let the delivery process finish its work and exit."""
        self.process.close()


#: Deliveries from which a post wakes the delivery processes only after
#: LARGE_FAN_OUT_WAKE_SECONDS, once the request has (most likely) been
#: answered.
LARGE_FAN_OUT = 100
LARGE_FAN_OUT_WAKE_SECONDS = 0.05

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
