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

"""Mailto subscriptions over a real SMTP exchange.

Zaqar's mailto task pipes each notification to its ``smtp_command``; here
that is Debian's msmtp, talking SMTP to an aiosmtpd server on 127.0.0.1.
"""

import email
import json
import shutil
import threading
import time

from aiosmtpd import controller

from tests.functional import base
from tests.functional.test_notifier import FILTERING


class _Mailbox:
    """An aiosmtpd handler that keeps every message it is handed."""

    def __init__(self):
        self.messages = []
        self.changed = threading.Condition()

    async def handle_DATA(self, server, session, envelope):
        with self.changed:
            self.messages.append(
                (envelope.rcpt_tos,
                 email.message_from_bytes(envelope.content)))
            self.changed.notify_all()
        return '250 OK'

    def wait_for(self, count, timeout=base.WAIT_TIMEOUT):
        deadline = time.monotonic() + timeout
        with self.changed:
            while len(self.messages) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError('expected %d mails, got %d'
                                         % (count, len(self.messages)))
                self.changed.wait(remaining)
            return list(self.messages)


class TestMailto(base.ServerTestCase):

    @classmethod
    def setUpClass(cls):
        msmtp = shutil.which('msmtp')
        if msmtp is None:
            raise AssertionError('msmtp is not installed: run make services '
                                 '(apt-get install msmtp)')
        cls.mailbox = _Mailbox()
        smtp = controller.Controller(cls.mailbox, hostname=base.HOST,
                                     port=base.free_port())
        smtp.start()
        cls.addClassCleanup(smtp.stop)
        cls.CONF_OVERRIDES = dict(FILTERING, notification={
            'smtp_command': '%s --host=%s --port=%d --auth=off --tls=off '
                            '--from=zaqar@localhost -t'
                            % (msmtp, base.HOST, smtp.port)})
        super().setUpClass()

    def test_only_matching_subscribers_are_mailed(self):
        self.assertEqual(201, self.client.create_queue(self.queue).status_code)
        for address, tags in (('apple@example.com', ['apple']),
                              ('xiaomi@example.com', ['xiaomi'])):
            response = self.client.subscribe(
                self.queue, 'mailto:' + address,
                {'filter_policies': tags, 'subject': 'Orders',
                 'from': 'zaqar@example.com'})
            self.assertEqual(201, response.status_code, response.text)
        response = self.client.post_messages(self.queue, [
            {'ttl': 300, 'body': {'order': 1},
             'filter_policies': ['apple', 'imac']}])
        self.assertEqual(201, response.status_code, response.text)
        [(recipients, mail)] = self.mailbox.wait_for(1)
        time.sleep(0.5)
        self.assertEqual(1, len(self.mailbox.messages))
        self.assertEqual(['apple@example.com'], recipients)
        self.assertEqual('Orders', mail['Subject'])
        notification = json.loads(mail.get_payload())
        self.assertEqual({'order': 1}, notification['body'])
        self.assertEqual(['apple', 'imac'], notification['filter_policies'])

    def mails_to(self, address):
        """Take the mails to ``address`` out of the mailbox."""
        with self.mailbox.changed:
            found = [m for m in self.mailbox.messages if address in m[0]]
            self.mailbox.messages[:] = [m for m in self.mailbox.messages
                                        if address not in m[0]]
        return found

    def test_deliveries_say_mail_is_not_tracked(self):
        self.assertEqual(201, self.client.create_queue(self.queue).status_code)
        ids = {}
        for subscriber in ('mailto:ops@example.com',
                           self.receiver.url(self.queue)):
            response = self.client.subscribe(self.queue, subscriber, {})
            self.assertEqual(201, response.status_code, response.text)
            ids[subscriber.split(':')[0]] = response.json()['subscription_id']
        response = self.client.post_messages(self.queue, [{'body': 1}])
        self.assertEqual(201, response.status_code, response.text)
        base.wait_until(lambda: self.mails_to('ops@example.com'))
        self.receiver.wait_for(1, self.queue)

        def deliveries(scheme):
            response = self.client.get(
                '/v2/queues/%s/subscriptions/%s/deliveries'
                % (self.queue, ids[scheme]))
            self.assertEqual(200, response.status_code, response.text)
            return response.json()

        mail = deliveries('mailto')
        self.assertEqual(
            {'queue': self.queue, 'subscription_id': ids['mailto'],
             'subscriber': 'mailto:ops@example.com', 'tracked': False},
            {key: mail[key] for key in mail if key != 'description'})
        self.assertIn('mailto subscribers are not counted',
                      mail['description'])
        base.wait_until(lambda: deliveries('http')['delivered'] == 1)
        self.assertTrue(deliveries('http')['tracked'])
