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

"""The delivery process of a server whose store keeps a delivery ledger.

The server starts it with its own configuration files. It opens the
ledger, and dispatches due deliveries until the server is gone; a post
wakes it up so that new deliveries go out at once.
"""

from concurrent import futures
import os
import queue as queue_module
import threading

from oslo_config import cfg
from oslo_log import log as logging
from zaqar import bootstrap

from zaqar_filtering.delivery.dispatcher import Dispatcher
from zaqar_filtering.delivery.poster import LoopPoster
from zaqar_filtering import opts
from zaqar_filtering.stages import webhook
from zaqar_filtering import store as policy_store

LOG = logging.getLogger(__name__)

#: Seconds between two checks that the server is still alive.
PARENT_CHECK_SECONDS = 1.0


def config_args(conf):
    """Return the command line that loads ``conf``'s files again."""
    args = []
    for path in conf.config_file or ():
        args += ['--config-file', path]
    directories = conf.config_dir or ()
    if isinstance(directories, str):
        directories = [directories]
    for path in directories:
        args += ['--config-dir', path]
    return args


def check_lease(conf):
    """Refuse a lease a slow delivery could outlast.

    :raises ValueError: naming both options.
    """
    opts.register_opts(conf)
    lease = conf[opts.DELIVERY_GROUP_NAME].lease_seconds
    timeout = conf[opts.GROUP_NAME].delivery_timeout_seconds
    if lease <= 2 * timeout:
        raise ValueError('[%s] lease_seconds (%s) must exceed twice [%s] '
                         'delivery_timeout_seconds (%s): a delivery that '
                         'outlasts its lease may be posted twice'
                         % (opts.DELIVERY_GROUP_NAME, lease,
                            opts.GROUP_NAME, timeout))


def serve(work, args, workers, parent_pid):
    """Dispatch the ledger's deliveries until the server is gone.

    :param work: a ``multiprocessing.Queue`` of what the server hands over:
        a wake-up call (new deliveries are in the ledger), a batch to
        deliver without the ledger (``(subscriptions, notifications,
        retry_policy, project)``, while the ledger is unreachable), or None
        to stop.
    :param args: the server's configuration files (:func:`config_args`).
    """
    conf = cfg.ConfigOpts()
    logging.register_options(conf)
    conf(args, project='zaqar', prog='zaqar-filtering-delivery',
         default_config_files=[], default_config_dirs=[])
    logging.setup(conf, 'zaqar-filtering-delivery')
    bootstrap.Bootstrap(conf)  # registers Zaqar's options
    opts.register_opts(conf)
    group = conf[opts.DELIVERY_GROUP_NAME]
    if group.niceness:
        # A fan-out must not slow down the server's requests.
        os.nice(group.niceness)
    ledger = policy_store.load_store(conf).delivery_ledger()
    tasks = webhook.load_tasks(conf[opts.GROUP_NAME].delivery_timeout_seconds,
                               conf)
    dispatcher = Dispatcher(
        ledger, LoopPoster(tasks, workers),
        opts.retry_settings_from_conf(conf), workers, group.lease_seconds,
        group.poll_seconds, group.report_seconds)
    unrecorded = futures.ThreadPoolExecutor(
        max_workers=workers, thread_name_prefix='zaqar-filtering-unrecorded')
    stop = threading.Event()

    def handle(item):
        if isinstance(item, tuple):
            subscriptions, notifications, retry_policy, project = item
            for subscription in subscriptions:
                # The tasks that deliver inside Zaqar (queue:) read the
                # project from the subscription.
                unrecorded.submit(tasks.execute,
                                  dict(subscription, project=project),
                                  notifications,
                                  queue_retry_policy=retry_policy)
        dispatcher.wake()

    _deliver_here(conf, ledger, handle)

    def listen():
        while not stop.is_set():
            try:
                item = work.get(timeout=PARENT_CHECK_SECONDS)
            except queue_module.Empty:
                item = None
                if os.getppid() != parent_pid:
                    stop.set()
            else:
                if item is None:
                    stop.set()
            handle(item)

    listener = threading.Thread(target=listen, name='zaqar-filtering-wake',
                                daemon=True)
    listener.start()
    LOG.info('Delivering webhooks from the %s, up to %d at once',
             type(ledger).__name__, 2 * workers)
    dispatcher.run(stop.is_set)
    unrecorded.shutdown(wait=True)


class _Here:
    """Hands a delivery process's own posts to its dispatcher.

    What :class:`~zaqar_filtering.stages.sender.DeliveryProcess` is to a
    server: ``put`` takes what a post hands over, ``wake`` says that the
    ledger has new deliveries.
    """

    def __init__(self, handle):
        self.put = handle

    def wake(self):
        """Look at the ledger now."""
        self.put(None)

    def start(self):
        """Nothing to start: this is the delivery process."""

    def close(self):
        """Nothing to stop here."""


def _deliver_here(conf, ledger, handle):
    """Have this process's own posts delivered by ``handle``.

    A ``queue:`` delivery posts into a queue through Zaqar's pipeline, and
    that queue's subscriptions are recorded in the ledger by the notifier
    stage of this process: they wake this process's dispatcher instead of
    starting a delivery process of their own.
    """
    # The notifier stage imports this module.
    from zaqar_filtering.stages import notifier
    from zaqar_filtering.stages import sender

    lifecycle = conf[opts.DELIVERY_GROUP_NAME].lifecycle_seconds
    notifier.use_webhook_sender(conf, sender.LedgerSender(
        ledger, _Here(handle), lifecycle))
