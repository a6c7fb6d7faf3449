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

"""Base class of the zaqar-filtering API tests.

Filtered delivery is observed the way zaqar-tempest-plugin observes
delivery: through trust+ subscriptions whose subscriber is another queue's
``messages`` resource (a "sink"), so that each notification Zaqar pushes
lands as a message in that queue, where the test reads it back.
"""

import json
import time

from oslo_utils import uuidutils
from tempest import config
from tempest.lib.common.utils import data_utils
from tempest.lib.common.utils import test_utils
from tempest.lib import exceptions as lib_exc
from zaqar_tempest_plugin.tests import base as zaqar_base

from zaqar_filtering_tempest_plugin.services import messaging_client

CONF = config.CONF

NOTIFICATION = 'Notification'


class BaseFilteringTest(zaqar_base.BaseV2MessagingTest):
    """Zaqar v2 tests of a deployment running zaqar-filtering."""

    @classmethod
    def skip_checks(cls):
        super().skip_checks()
        if not CONF.service_available.zaqar_filtering:
            raise cls.skipException('zaqar-filtering is not enabled '
                                    '([service_available] zaqar_filtering)')

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.client = messaging_client.FilteringMessagingClient(
            cls.os_primary.auth_provider,
            CONF.messaging.catalog_type,
            CONF.identity.region,
            build_interval=CONF.compute.build_interval,
            build_timeout=CONF.compute.build_timeout)

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.filtering_cfg = CONF.messaging_filtering

    def create_test_queue(self, prefix='Filtering'):
        """Create a queue deleted after the test; return its name."""
        queue_name = data_utils.rand_name(prefix)
        self.client.create_queue(queue_name)
        self.addCleanup(test_utils.call_and_ignore_notfound_exc,
                        self.client.delete_queue, queue_name)
        return queue_name

    def subscribe(self, queue_name, subscriber, options=None, ttl=3600):
        """Create a subscription deleted after the test; return its id."""
        _, body = self.client.create_subscription(
            queue_name, {'subscriber': subscriber, 'ttl': ttl,
                         'options': options or {}})
        subscription_id = body['subscription_id']
        self.addCleanup(test_utils.call_and_ignore_notfound_exc,
                        self.client.delete_subscription, queue_name,
                        subscription_id)
        return subscription_id

    def subscribe_sink(self, queue_name, options=None):
        """Subscribe a new sink queue to ``queue_name`` (trust+).

        :returns: ``(sink queue name, subscription id)``.
        """
        sink = self.create_test_queue('Filtering-Sink')
        subscriber = 'trust+{0}/{1}/queues/{2}/messages'.format(
            self.client.base_url, self.client.uri_prefix, sink)
        post_body = json.dumps(
            {'messages': [{'body': '$zaqar_message$', 'ttl': 600}]})
        post_headers = {'X-Project-ID': self.client.tenant_id,
                        'Client-ID': uuidutils.generate_uuid()}
        options = dict(options or {}, post_data=post_body,
                       post_headers=post_headers)
        return sink, self.subscribe(queue_name, subscriber, options)

    def notifications(self, sink):
        """Return the notification bodies a sink queue received."""
        _, messages = self.client.list_all_messages(sink)
        return [message['body'] for message in messages
                if isinstance(message.get('body'), dict) and
                message['body'].get('Message_Type') == NOTIFICATION]

    def wait_for_notifications(self, expected):
        """Wait for the expected number of notifications in each sink.

        :param expected: ``{sink: count}``.
        :returns: ``{sink: [notification body, ...]}`` once every sink has
            at least its count and ``delivery_settle`` seconds passed, so
            that a notification that should not be there shows up too.
        """
        def arrived():
            return all(len(self.notifications(sink)) >= count
                       for sink, count in expected.items())

        if not test_utils.call_until_true(
                arrived, self.filtering_cfg.delivery_timeout, 0.5):
            self.fail('notifications did not arrive within %d s: expected '
                      '%s, got %s' % (
                          self.filtering_cfg.delivery_timeout, expected,
                          {sink: len(self.notifications(sink))
                           for sink in expected}))
        time.sleep(self.filtering_cfg.delivery_settle)
        return {sink: self.notifications(sink) for sink in expected}

    def post(self, queue_name, *messages):
        """Post messages (dicts beside ``ttl``) to a queue."""
        body = {'messages': [dict({'ttl': 300}, **message)
                             for message in messages]}
        return self.client.post_messages(queue_name, body)

    def assertBadRequest(self, needle, function, *args, **kwargs):
        """Assert a 400 whose description contains ``needle``."""
        exc = self.assertRaises(lib_exc.BadRequest, function, *args,
                                **kwargs)
        body = exc.resp_body
        description = (body.get('description', '')
                       if isinstance(body, dict) else str(body))
        self.assertIn(needle, description)
        return description
