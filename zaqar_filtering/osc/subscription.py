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

"""``openstack messaging subscription match`` and ``... deliveries``.

The commands take the queue from the command line; their subclasses in
:mod:`zaqar_filtering.osc.topic` take a topic (``COLLECTION``).
"""

from osc_lib.command import command

from zaqar_filtering.osc import common

COLUMNS = ('Subscription ID', 'Subscriber', 'Matched', 'Reason')
DELIVERY_COLUMNS = ('Subscription ID', 'Subscriber', 'Pending', 'Retrying',
                    'Delivered', 'Dropped', 'Expired', 'Last Error',
                    'Last Error At')


def _match_rows(page):
    return ([(entry['subscription_id'], entry['subscriber'], True, '')
             for entry in page['matched']]
            + [(entry['subscription_id'], entry['subscriber'], False,
                entry['reason']) for entry in page['not_matched']])


class OfQueue:
    """A command about a queue's subscriptions: its first argument."""

    #: The API's collection and the argument's name.
    COLLECTION = 'queues'
    NOUN = 'queue'

    def add_source(self, parser):
        parser.add_argument('source', metavar='<%s_name>' % self.NOUN,
                            help='Name of the %s' % self.NOUN)

    def add_subscription(self, parser):
        """Add the source and the subscription ID arguments."""
        self.add_source(parser)
        parser.add_argument('subscription_id', metavar='<subscription_id>',
                            help='ID of the subscription')

    def subscriptions_path(self, parsed_args, *parts):
        return common.path(self.COLLECTION, parsed_args.source,
                           'subscriptions', *parts)


class MatchSubscriptions(OfQueue, command.Lister):
    """Tell who would receive a message, and why the others would not"""

    _description = ('Tell which subscriptions of a queue would receive a '
                    'message, and why each of the others would not. Nothing '
                    'is posted, stored or delivered.')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        self.add_source(parser)
        parser.add_argument(
            '--message', metavar='<json>|@<file>', required=True,
            help='The message as it would be posted: JSON such as '
                 '\'{"body": {...}, "filter_policies": ["tag"], '
                 '"routing_key": "a.b", "attributes": {"k": "v"}}\', or '
                 '@ and the name of a file holding it')
        common.add_page_size(parser, 'Subscriptions')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        document = {'message': common.read_message(parsed_args.message)}
        return COLUMNS, list(common.pages(
            client, 'POST', self.subscriptions_path(parsed_args, 'match'),
            _match_rows, parsed_args.page_size, json=document))


class ShowSubscriptionDeliveries(OfQueue, command.ShowOne):
    """Show a subscription's pending and finished deliveries"""

    _description = ("Show what a subscription has pending in the delivery "
                    "ledger, how many deliveries succeeded, were dropped "
                    "or expired, and its last error.")

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        self.add_subscription(parser)
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        stats = client.request('GET', self.subscriptions_path(
            parsed_args, parsed_args.subscription_id, 'deliveries'))
        return DELIVERY_COLUMNS, tuple(
            stats.get(column.lower().replace(' ', '_'))
            for column in DELIVERY_COLUMNS)
