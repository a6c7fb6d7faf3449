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

"""Queue subscribers: ``"subscriber": "queue:NAME"`` (CMQ's topic -> queue).

A matching message becomes a message of queue NAME of the subscription's
own project, with its body, ttl and filter fields. It goes through the
delivery ledger like a webhook: the notifier records the delivery
(:class:`~zaqar_filtering.stages.sender.LedgerSender`), and the delivery
process posts it with
:meth:`QueueTask.attempt` through Zaqar's storage pipeline, so the target
queue's own subscriptions filter it again. A missing target queue, or one
that refuses the message (larger than its ``_max_messages_post_size``, or
a storage error), is a failed attempt, retried under the subscription's
retry policy and counted in its ``deliveries``.

The project is the one the ledger recorded for the delivery, that is the
project of the subscription: the subscriber string names a queue only, so
no subscription reaches another project's queue.
"""

import json
import threading
import uuid

from oslo_log import log as logging
from zaqar import bootstrap
from zaqar.conf import transport
from zaqar.transport import validation

from zaqar_filtering import InvalidPolicy
from zaqar_filtering.policy import message as policy_message

LOG = logging.getLogger(__name__)

#: The URI scheme of queue subscribers.
SCHEME = 'queue'
PREFIX = SCHEME + ':'
#: The subscription option naming the subscriber, in error messages.
OPTION = 'subscriber'
#: Options that shape an HTTP request and mean nothing for a queue.
HTTP_ONLY_OPTIONS = ('post_data',)


def is_queue_subscriber(subscriber):
    """Return whether ``subscriber`` is a ``queue:`` subscriber."""
    return isinstance(subscriber, str) and subscriber.startswith(PREFIX)


def target_queue(subscriber):
    """Return the queue name of a ``queue:NAME`` subscriber.

    :raises InvalidPolicy: naming the rule the name breaks (Zaqar's queue
        name rules: 1 to 64 ASCII letters, digits, ``_``, ``-`` or ``.``).
    """
    name = subscriber[len(PREFIX):]
    if not name:
        raise InvalidPolicy(OPTION, 'queue_name_empty',
                            '%r names no queue; write queue:NAME'
                            % subscriber)
    if len(name) > validation.QUEUE_NAME_MAX_LEN:
        raise InvalidPolicy(OPTION, 'queue_name_length',
                            'queue name %r has %d characters; the limit is '
                            '%d' % (name, len(name),
                                    validation.QUEUE_NAME_MAX_LEN))
    if not validation.QUEUE_NAME_REGEX.match(name):
        raise InvalidPolicy(OPTION, 'queue_name_characters',
                            'queue name %r may only contain ASCII letters, '
                            'digits, underscores, dashes and dots' % name)
    return name


def check_subscription(subscriber, options, ledger):
    """Check a ``queue:`` subscription; nothing to do for other schemes.

    :param ledger: the delivery ledger, or None when the store keeps none.
    :raises InvalidPolicy: for a bad queue name, an HTTP-only option, or a
        deployment without a delivery ledger.
    """
    if not is_queue_subscriber(subscriber):
        return
    target_queue(subscriber)
    for option in HTTP_ONLY_OPTIONS:
        if option in (options or {}):
            raise InvalidPolicy(option, 'queue_subscriber_option',
                                'applies to webhooks only, not to the queue '
                                'subscriber %s' % subscriber)
    if ledger is None:
        raise InvalidPolicy(OPTION, 'queue_subscriber_ledger',
                            'queue subscribers are delivered through the '
                            'delivery ledger, which this deployment does '
                            'not keep (see [filtering] policy_store)')


def message_of(notification):
    """Return the message a notification posts into the target queue."""
    message = {'ttl': notification['ttl'],
               'body': notification.get(policy_message.BODY)}
    for field in policy_message.POSTED_FIELDS:
        if field in notification:
            message[field] = notification[field]
    return message


class QueueTask:
    """Posts a notification into the target queue, once per attempt.

    Registered as the ``queue`` task of ``zaqar_filtering.notification.
    tasks`` (the delivery process) and of ``zaqar.notification.tasks``
    (Zaqar looks a subscriber's task up there when it is created).

    :param timeout: unused (the signature of the delivery tasks).
    :param conf: zaqar.conf's ``ConfigOpts``; Zaqar's storage is built
        from it on the first attempt.
    :param storage: Zaqar's pipelined data driver, instead of ``conf``.
    """

    def __init__(self, timeout=None, conf=None, storage=None):
        self._conf = conf
        self._storage = storage
        self._client_uuid = str(uuid.uuid4())
        self._lock = threading.Lock()

    def register(self, subscriber, options, ttl, project_id, request_data):
        """Nothing to set up for a queue (Zaqar's task interface)."""

    def attempt(self, subscriber, data, headers, project=None):
        """Post once; return None on success, else what went wrong.

        :param data: the notification, as JSON text.
        :param project: the project of the subscription (from the ledger).
        """
        try:
            name = target_queue(subscriber)
            message = message_of(json.loads(data))
        except (InvalidPolicy, ValueError, KeyError, TypeError) as exc:
            return 'not a queue delivery: %s' % exc
        try:
            storage = self._zaqar_storage()
            queues = storage.queue_controller
            if not queues.exists(name, project):
                return ('queue %s does not exist in project %s'
                        % (name, project))
            refused = self._refused(queues.get_metadata(name, project),
                                    name, message)
            if refused:
                return refused
            storage.message_controller.post(
                name, [message], client_uuid=self._client_uuid,
                project=project)
        except Exception as exc:
            LOG.warning('Posting into queue %(queue)s of project '
                        '%(project)s failed', {'queue': name,
                                               'project': project},
                        exc_info=True)
            return '%s: %s' % (type(exc).__name__, exc or repr(exc))
        return None

    def execute(self, subscription, messages, **kwargs):
        """Post each message once, without the ledger.

        Only while the delivery ledger cannot be reached; a failure is
        logged as an error, as there is no place to keep it.
        """
        project = subscription.get('project')
        for notification in messages:
            error = self.attempt(subscription['subscriber'],
                                 json.dumps(notification), None,
                                 project=project)
            if error:
                LOG.error('Could not deliver a message to %(subscriber)s '
                          '(project %(project)s) while the delivery ledger '
                          'is unavailable: %(error)s',
                          {'subscriber': subscription['subscriber'],
                           'project': project, 'error': error})

    def _refused(self, metadata, name, message):
        """Return why the queue refuses ``message``, or None."""
        conf = self._conf if self._conf is not None else self._storage.conf
        conf.register_opts(transport.ALL_OPTS, group=transport.GROUP_NAME)
        limit = metadata.get('_max_messages_post_size',
                             conf[transport.GROUP_NAME].max_messages_post_size)
        size = len(json.dumps({'messages': [message]}).encode('utf-8'))
        if size > limit:
            return ('queue %s refuses the message: it takes %d bytes, the '
                    'queue at most %d (_max_messages_post_size)'
                    % (name, size, limit))
        return None

    def _zaqar_storage(self):
        with self._lock:
            if self._storage is None:
                if self._conf is None:
                    raise RuntimeError('this queue task has no configuration '
                                       'to reach Zaqar\'s storage')
                self._storage = bootstrap.Bootstrap(self._conf).storage
            return self._storage
