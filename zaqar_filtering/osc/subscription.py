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

"""``openstack messaging subscription match`` and ``... deliveries``."""

import json
import urllib.parse

from osc_lib.command import command
from osc_lib import exceptions

COLUMNS = ('Subscription ID', 'Subscriber', 'Matched', 'Reason')
DELIVERY_COLUMNS = ('Subscription ID', 'Subscriber', 'Pending', 'Retrying',
                    'Delivered', 'Dropped', 'Expired', 'Last Error',
                    'Last Error At')


def _quote(name):
    return urllib.parse.quote(name, safe='')


def read_message(value):
    """Return the message of ``--message``: JSON text, or ``@file``.

    :raises osc_lib.exceptions.CommandError: when it is not a JSON object.
    """
    if value.startswith('@'):
        try:
            with open(value[1:], encoding='utf-8') as source:
                value = source.read()
        except OSError as exc:
            raise exceptions.CommandError('--message: cannot read %s: %s'
                                          % (value[1:], exc.strerror))
    try:
        message = json.loads(value)
    except ValueError as exc:
        raise exceptions.CommandError('--message: not JSON: %s' % exc)
    if not isinstance(message, dict):
        raise exceptions.CommandError(
            '--message: must be a JSON object such as {"body": ...}, not %s'
            % type(message).__name__)
    return message


class MatchSubscriptions(command.Lister):
    """Tell who would receive a message, and why the others would not"""

    _description = ('Tell which subscriptions of a queue would receive a '
                    'message, and why each of the others would not. Nothing '
                    'is posted, stored or delivered.')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('queue_name', metavar='<queue_name>',
                            help='Name of the queue')
        parser.add_argument(
            '--message', metavar='<json>|@<file>', required=True,
            help='The message as it would be posted: JSON such as '
                 '\'{"body": {...}, "filter_policies": ["tag"], '
                 '"routing_key": "a.b", "attributes": {"k": "v"}}\', or '
                 '@ and the name of a file holding it')
        parser.add_argument(
            '--page-size', metavar='<count>', type=int,
            help='Subscriptions per request (the server\'s default when '
                 'not given); every page is read')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        document = {'message': read_message(parsed_args.message)}
        path = '/v2/queues/%s/subscriptions/match' % _quote(
            parsed_args.queue_name)
        params = {}
        if parsed_args.page_size is not None:
            params['limit'] = parsed_args.page_size
        rows = []
        while True:
            page = client.request('POST', path, json=document, params=params)
            rows += [(entry['subscription_id'], entry['subscriber'], True,
                      '') for entry in page['matched']]
            rows += [(entry['subscription_id'], entry['subscriber'], False,
                      entry['reason']) for entry in page['not_matched']]
            if not page['links']:
                return COLUMNS, rows
            path, params = page['links'][0]['href'], {}


class ShowSubscriptionDeliveries(command.ShowOne):
    """Show a subscription's pending and finished deliveries"""

    _description = ("Show what a subscription has pending in the delivery "
                    "ledger, how many deliveries succeeded, were dropped "
                    "or expired, and its last error.")

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('queue_name', metavar='<queue_name>',
                            help='Name of the queue')
        parser.add_argument('subscription_id', metavar='<subscription_id>',
                            help='ID of the subscription')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        stats = client.request('GET', '/v2/queues/%s/subscriptions/%s/'
                               'deliveries' % (
                                   _quote(parsed_args.queue_name),
                                   _quote(parsed_args.subscription_id)))
        return DELIVERY_COLUMNS, tuple(
            stats.get(column.lower().replace(' ', '_'))
            for column in DELIVERY_COLUMNS)
