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

"""zaqar-tempest-plugin's v2 client, with what filtering tests need more."""

import json
import urllib.parse

from zaqar_tempest_plugin.services.messaging.json import messaging_client


class FilteringMessagingClient(messaging_client.V2MessagingClient):
    """Zaqar's v2 API as users of subscription filtering call it.

    Requests are those of ``V2MessagingClient``; a 400 answer raises
    ``tempest.lib.exceptions.BadRequest`` whose ``resp_body`` holds Zaqar's
    ``title`` and ``description``.
    """

    def create_queue(self, queue_name, metadata=None):
        """Create a queue, with ``metadata`` if given; expect 201 or 204."""
        if metadata is None:
            return super().create_queue(queue_name)
        uri = '{0}/queues/{1}'.format(self.uri_prefix, queue_name)
        resp, body = self.put(uri, body=json.dumps(metadata),
                              headers=self.headers)
        self.expected_success([201, 204], resp.status)
        return resp, body

    def update_subscription(self, queue_name, subscription_id, rbody):
        """Update a subscription; expect 204."""
        resp, body = super().update_subscription(queue_name,
                                                 subscription_id, rbody)
        self.expected_success(204, resp.status)
        return resp, body

    def list_all_messages(self, queue_name, limit=20):
        """Return the messages of a queue (with echo), up to ``limit``."""
        uri = '{0}/queues/{1}/messages?echo=true&limit={2}'.format(
            self.uri_prefix, queue_name, limit)
        resp, body = self.get(uri, extra_headers=True, headers=self.headers)
        self.expected_success([200, 204], resp.status)
        if resp.status == 204:
            return resp, []
        return resp, json.loads(body)['messages']

    def total_messages(self, queue_name):
        """Return the number of messages stored in a queue."""
        resp, body = self.show_queue_stats(queue_name)
        return body['messages']['total']

    def show_subscription_deliveries(self, queue_name, subscription_id):
        """Return a subscription's delivery counts; expect 200."""
        uri = '{0}/queues/{1}/subscriptions/{2}/deliveries'.format(
            self.uri_prefix, queue_name, subscription_id)
        resp, body = self.get(uri, headers=self.headers)
        self.expected_success(200, resp.status)
        return resp, json.loads(body)

    def create_topic(self, topic_name, metadata=None):
        """Create a topic; expect 201 or 204."""
        uri = '{0}/topics/{1}'.format(self.uri_prefix, topic_name)
        resp, body = self.put(uri, body=json.dumps(metadata or {}),
                              headers=self.headers)
        self.expected_success([201, 204], resp.status)
        return resp, body

    def delete_topic(self, topic_name):
        """Delete a topic and its subscriptions; expect 204."""
        uri = '{0}/topics/{1}'.format(self.uri_prefix, topic_name)
        resp, body = self.delete(uri, headers=self.headers)
        self.expected_success(204, resp.status)
        return resp, body

    def create_topic_subscription(self, topic_name, rbody):
        """Subscribe to a topic; expect 201."""
        uri = '{0}/topics/{1}/subscriptions'.format(self.uri_prefix,
                                                    topic_name)
        resp, body = self.post(uri, body=json.dumps(rbody),
                               headers=self.headers)
        self.expected_success(201, resp.status)
        return resp, json.loads(body)

    def post_topic_messages(self, topic_name, rbody):
        """Publish messages to a topic; expect 201."""
        uri = '{0}/topics/{1}/messages'.format(self.uri_prefix, topic_name)
        resp, body = self.post(uri, body=json.dumps(rbody),
                               extra_headers=True, headers=self.headers)
        self.expected_success(201, resp.status)
        return resp, json.loads(body)

    def show_topic_stats(self, topic_name):
        """Return what a topic retains; expect 200."""
        uri = '{0}/topics/{1}/stats'.format(self.uri_prefix, topic_name)
        resp, body = self.get(uri, headers=self.headers)
        self.expected_success(200, resp.status)
        return resp, json.loads(body)

    def match_subscriptions(self, queue_name, message, **params):
        """Return the dry run of ``message`` on a queue; expect 200.

        :param params: ``limit`` and ``marker``, or ``href``: a ``next``
            link of a previous answer.
        """
        href = params.pop('href', None)
        if href is not None:
            uri = href
        else:
            uri = '{0}/queues/{1}/subscriptions/match'.format(
                self.uri_prefix, queue_name)
            if params:
                uri += '?' + urllib.parse.urlencode(params)
        resp, body = self.post(uri, body=json.dumps({'message': message}),
                               extra_headers=True, headers=self.headers)
        self.expected_success(200, resp.status)
        return resp, json.loads(body)
