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

"""Makes the attempts of claimed deliveries, all at once, on an event loop.

A task with an ``attempt_async`` coroutine (webhooks) is awaited on the
loop's thread; any other task's ``attempt`` (``queue:``, which posts
through Zaqar's storage) runs on a small thread pool.
"""

import asyncio
from concurrent import futures
import functools
import threading

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class LoopPoster:
    """Attempts deliveries on its own event loop thread.

    :param tasks: a :class:`~zaqar_filtering.stages.webhook.SchemeTasks`.
    :param threads: threads for the tasks that block.
    """

    def __init__(self, tasks, threads):
        self._tasks = tasks
        self._blocking = futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix='zaqar-filtering-post')
        self._loop = asyncio.new_event_loop()
        self._running = set()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name='zaqar-filtering-loop',
            daemon=True)
        self._thread.start()

    def submit(self, deliveries, done):
        """Attempt each delivery; then call ``done(delivery, error)``.

        ``error`` is None on success, else what went wrong, as text; an
        exception when the attempt failed unexpectedly.
        """
        self._loop.call_soon_threadsafe(self._start, deliveries, done)

    def shutdown(self):
        """Finish the attempts under way, then stop the loop."""
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._drain(), self._loop).result()
        self._thread.join()
        self._loop.close()
        self._blocking.shutdown()

    async def _drain(self):
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        for task in self._tasks.all():
            closing = getattr(task, 'close_async', None)
            if closing is not None:
                await closing()
        self._loop.call_soon(self._loop.stop)

    def _start(self, deliveries, done):
        for delivery in deliveries:
            attempt = self._loop.create_task(self._attempt(delivery, done))
            self._running.add(attempt)
            attempt.add_done_callback(self._running.discard)

    async def _attempt(self, delivery, done):
        try:
            task = self._tasks.task_for(delivery.subscriber)
        except ValueError as exc:
            done(delivery, str(exc))
            return
        try:
            attempt = getattr(task, 'attempt_async', None)
            if attempt is not None:
                error = await attempt(delivery.subscriber, delivery.body,
                                      delivery.headers,
                                      project=delivery.project)
            else:
                error = await self._loop.run_in_executor(
                    self._blocking, functools.partial(
                        task.attempt, delivery.subscriber, delivery.body,
                        delivery.headers, project=delivery.project))
        except Exception as exc:
            done(delivery, exc)
        else:
            done(delivery, error)
