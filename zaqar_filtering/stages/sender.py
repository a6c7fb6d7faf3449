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
slow every request down as the fan-out grows. A post hands it one batch:
the matching subscriptions that get the same messages, with those messages.
Other schemes (mailto, trust+) run Zaqar's own tasks on a thread pool, as
the stock notifier does.
"""

import logging as std_logging
import multiprocessing
import os
import queue as queue_module
import sys
import threading

from concurrent import futures
from oslo_log import log as logging

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

    def send(self, subscriptions, notifications, retry_policy):
        """Start delivering the notifications to each subscription."""
        for subscription in subscriptions:
            # Zaqar's tasks add fields to the messages they send.
            self._executor.submit(self._task.execute, subscription,
                                  [dict(n) for n in notifications],
                                  conf=self._conf,
                                  queue_retry_policy=retry_policy)


class ProcessSender:
    """Runs webhook deliveries in a delivery process started on first use.

    :param workers: delivery threads in that process.
    :param timeout: seconds each request may wait (connect, then answer).
    """

    def __init__(self, workers, timeout):
        self._workers = workers
        self._timeout = timeout
        self._context = multiprocessing.get_context('spawn')
        python = _python()
        if python != sys.executable:
            # Under uWSGI or mod_wsgi, sys.executable is not Python.
            self._context.set_executable(python)
        self._lock = threading.Lock()
        self._process = None
        self._queue = None

    def send(self, subscriptions, notifications, retry_policy):
        """Queue the notifications for each subscription."""
        with self._lock:
            if self._process is None or not self._process.is_alive():
                self._start()
            self._queue.put((subscriptions, notifications, retry_policy))

    def close(self):
        """Let the delivery process finish its work and exit."""
        with self._lock:
            if self._process is not None and self._process.is_alive():
                self._queue.put(None)
                self._process.join()
            self._process = None

    def _start(self):
        if self._process is not None:
            LOG.error('The webhook delivery process %d exited with code %s; '
                      'starting a new one', self._process.pid,
                      self._process.exitcode)
        self._queue = self._context.Queue()
        self._process = self._context.Process(
            target=serve, args=(self._queue, self._workers, self._timeout,
                                os.getpid()),
            name='zaqar-filtering-webhooks', daemon=True)
        self._process.start()
        LOG.info('Started the webhook delivery process %d',
                 self._process.pid)


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

    This is the main function of the delivery process.
    """
    from zaqar_filtering.stages.webhook import WebhookTask

    std_logging.basicConfig(
        level=std_logging.INFO,
        format='%(asctime)s %(process)d %(levelname)s %(name)s %(message)s')
    task = WebhookTask(timeout)
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
