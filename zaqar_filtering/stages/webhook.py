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

"""Webhook delivery with keep-alive sessions and timeouts.

Zaqar's own webhook task posts with a new connection and no timeout for
every message, and mutates the messages it sends. This task keeps its
retry schedule (the subscription's or the queue's ``_retry_policy``) and
its payload, ``post_data`` and ``post_headers`` handling, but posts through
one keep-alive ``requests.Session`` per delivery thread, always with a
timeout, on copies of the messages. It retries a request that failed or
got a 5xx answer, which is what the stock task means to do.
"""

import threading

from oslo_log import log as logging
from oslo_serialization import jsonutils
import requests
from zaqar.notification.tasks import webhook

LOG = logging.getLogger(__name__)


class WebhookTask(webhook.WebhookTask):
    """Delivers notifications to ``http`` and ``https`` subscribers.

    :param timeout: seconds to wait for a connection and for an answer.
    """

    def __init__(self, timeout):
        self._timeout = timeout
        self._local = threading.local()

    def execute(self, subscription, messages, headers=None, **kwargs):
        """Post each message; retry per the retry policy on failure."""
        headers = dict(headers or {'Content-Type': 'application/json'})
        options = subscription['options'] or {}
        headers.update(options.get('post_headers', {}))
        for message in messages:
            message = dict(message, queue_name=subscription['source'])
            data = jsonutils.dumps(message)
            if 'post_data' in options:
                data = options['post_data'].replace('"$zaqar_message$"',
                                                    data)
            if not self._post(subscription['subscriber'], data, headers,
                              retried=False):
                self._retry_post(options.get('_retry_policy', {}),
                                 kwargs.get('queue_retry_policy') or {},
                                 subscription['subscriber'], data, headers)

    def _post_request_success(self, subscriber, data, headers):
        # Called by the inherited retry schedule.
        return self._post(subscriber, data, headers, retried=True)

    def _post(self, subscriber, data, headers, retried):
        """Return False when the post should be retried."""
        try:
            response = self._session().post(subscriber, data=data,
                                            headers=headers,
                                            timeout=self._timeout)
        except requests.RequestException as exc:
            LOG.warning('Posting to %(subscriber)s failed%(again)s: %(exc)s',
                        {'subscriber': subscriber, 'exc': exc,
                         'again': ' again' if retried else ''})
            return False
        if response.status_code >= 500:
            LOG.warning('Posting to %(subscriber)s got HTTP %(status)d',
                        {'subscriber': subscriber,
                         'status': response.status_code})
            return False
        if response.status_code >= 400:
            # As the stock task does: a client error is not retried.
            LOG.warning('Posting to %(subscriber)s got HTTP %(status)d; '
                        'not retried', {'subscriber': subscriber,
                                        'status': response.status_code})
        return True

    def _session(self):
        session = getattr(self._local, 'session', None)
        if session is None:
            session = self._local.session = requests.Session()
        return session
