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

"""``openstack messaging topic ...``: topics and their subscriptions.

python-zaqarclient has no topic commands; these follow its queue and
subscription commands (the same arguments and columns where they exist).
"""

from osc_lib.cli import format_columns
from osc_lib.command import command
from osc_lib import exceptions

from zaqar_filtering.osc import common
from zaqar_filtering.osc import subscription

TOPIC_COLUMNS = ('Name', 'Metadata')
STATS_COLUMNS = ('Retained', 'Retrying', 'Delivered', 'Dropped', 'Expired',
                 'Total')
SUBSCRIPTION_COLUMNS = ('ID', 'Subscriber', 'TTL', 'Age', 'Confirmed',
                        'Options')
OPTIONS_EXAMPLE = '{"filter_policies": ["tag"]}'


class OfTopic(subscription.OfQueue):
    """A command about a topic: its first argument."""

    COLLECTION = 'topics'
    NOUN = 'topic'


def _topic_row(name, metadata):
    return name, format_columns.DictColumn(metadata)


def _subscription_row(found):
    return (found['id'], found['subscriber'], found['ttl'], found.get('age'),
            found.get('confirmed'),
            format_columns.DictColumn(found.get('options') or {}))


def _add_options(parser, required):
    parser.add_argument(
        '--options', metavar='<json>|@<file>', required=required,
        help='The subscription\'s options: JSON such as \'%s\' (filter '
             'policies, _retry_policy ...), or @ and the name of a file '
             'holding it' % OPTIONS_EXAMPLE)


def _options(parsed_args):
    return common.read_object(parsed_args.options, '--options',
                              OPTIONS_EXAMPLE)


class CreateTopic(OfTopic, command.ShowOne):
    """Create a topic, or replace its metadata"""

    _description = ('Create a topic, or replace the metadata of one that '
                    'exists. A topic keeps no messages: it delivers each '
                    'published message to its matching subscriptions.')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        self.add_source(parser)
        parser.add_argument(
            '--metadata', metavar='<json>|@<file>',
            help='The topic\'s metadata: JSON such as \'{"_retry_policy": '
                 '{"notify_strategy": "backoff"}}\', or @ and a file name')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        metadata = {}
        if parsed_args.metadata is not None:
            metadata = common.read_object(parsed_args.metadata,
                                          '--metadata', '{"_retry_policy": '
                                          '{...}}')
        path = common.path(self.COLLECTION, parsed_args.source)
        client.request('PUT', path, json=metadata)
        return TOPIC_COLUMNS, _topic_row(parsed_args.source,
                                         client.request('GET', path))


class ShowTopic(OfTopic, command.ShowOne):
    """Show a topic and its metadata"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        self.add_source(parser)
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        metadata = client.request('GET', common.path(self.COLLECTION,
                                                     parsed_args.source))
        return TOPIC_COLUMNS, _topic_row(parsed_args.source, metadata)


class ListTopics(OfTopic, command.Lister):
    """List the project's topics"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--detailed', action='store_true',
                            help='Show each topic\'s metadata too')
        common.add_page_size(parser, 'Topics')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        detailed = parsed_args.detailed
        found = common.pages(
            client, 'GET', common.path(self.COLLECTION) +
            ('?detailed=true' if detailed else ''),
            lambda page: page['topics'], parsed_args.page_size)
        if detailed:
            return TOPIC_COLUMNS, [_topic_row(topic['name'],
                                              topic['metadata'])
                                   for topic in found]
        return TOPIC_COLUMNS[:1], [(topic['name'],) for topic in found]


class DeleteTopic(OfTopic, command.Command):
    """Delete topics, with their subscriptions"""

    _description = ('Delete topics, with their subscriptions and the '
                    'deliveries those have pending.')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('topics', metavar='<topic_name>', nargs='+',
                            help='Name of a topic to delete')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        failed = []
        for name in parsed_args.topics:
            try:
                client.request('DELETE', common.path(self.COLLECTION, name))
            except exceptions.CommandError as exc:
                failed.append('%s: %s' % (name, exc))
        if failed:
            raise exceptions.CommandError(
                'Failed to delete %d of %d topics: %s' % (
                    len(failed), len(parsed_args.topics), '; '.join(failed)))


class ShowTopicStats(OfTopic, command.ShowOne):
    """Show what a topic retains: deliveries pending and finished"""

    _description = ('Show what a topic retains: its subscriptions\' '
                    'deliveries pending in the ledger (Retained; Retrying: '
                    'failed at least once) and how many were delivered, '
                    'dropped or expired.')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        self.add_source(parser)
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        stats = client.request('GET', common.path(
            self.COLLECTION, parsed_args.source, 'stats'))['messages']
        return STATS_COLUMNS, tuple(stats[column.lower()]
                                    for column in STATS_COLUMNS)


class PublishMessages(OfTopic, command.ShowOne):
    """Publish messages to a topic"""

    _description = ('Publish messages to a topic: each goes to the '
                    'subscriptions whose policies match it, and the topic '
                    'keeps none.')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        self.add_source(parser)
        parser.add_argument(
            '--message', metavar='<json>|@<file>', action='append',
            required=True, dest='messages',
            help='A message: JSON such as \'{"body": {...}, "ttl": 300, '
                 '"filter_policies": ["tag"], "routing_key": "a.b", '
                 '"attributes": {"k": "v"}}\', or @ and the name of a file '
                 'holding it; repeat for several (one request)')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        messages = [common.read_message(value)
                    for value in parsed_args.messages]
        answer = client.request('POST', common.path(
            self.COLLECTION, parsed_args.source, 'messages'),
            json={'messages': messages})
        return ('Topic', 'Published'), (parsed_args.source,
                                        len(answer['resources']))


class CreateTopicSubscription(OfTopic, command.ShowOne):
    """Create a subscription of a topic"""

    _description = ('Create a subscription of a topic: a webhook '
                    '(http://, https://), mailto: or queue:NAME (a queue of '
                    'the same project), with its filter policies in '
                    '--options.')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        self.add_source(parser)
        parser.add_argument('subscriber', metavar='<subscriber>',
                            help='Subscriber which will be notified')
        parser.add_argument('ttl', metavar='<ttl>', type=int,
                            help='Time to live of the subscription in '
                                 'seconds')
        _add_options(parser, required=False)
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        document = {'subscriber': parsed_args.subscriber,
                    'ttl': parsed_args.ttl, 'options': {}}
        if parsed_args.options is not None:
            document['options'] = _options(parsed_args)
        created = client.request('POST', self.subscriptions_path(parsed_args),
                                 json=document)
        return SUBSCRIPTION_COLUMNS, _subscription_row(client.request(
            'GET', self.subscriptions_path(parsed_args,
                                           created['subscription_id'])))


class ShowTopicSubscription(OfTopic, command.ShowOne):
    """Show a subscription of a topic"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        self.add_subscription(parser)
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        return SUBSCRIPTION_COLUMNS, _subscription_row(client.request(
            'GET', self.subscriptions_path(parsed_args,
                                           parsed_args.subscription_id)))


class UpdateTopicSubscription(ShowTopicSubscription):
    """Change a subscription of a topic"""

    _description = ('Change a subscription of a topic: its subscriber, its '
                    'TTL or its options (which replace the old ones).')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--subscriber', metavar='<subscriber>',
                            help='The new subscriber')
        parser.add_argument('--ttl', metavar='<ttl>', type=int,
                            help='The new time to live, in seconds')
        _add_options(parser, required=False)
        return parser

    def take_action(self, parsed_args):
        changes = {key: getattr(parsed_args, key)
                   for key in ('subscriber', 'ttl')
                   if getattr(parsed_args, key) is not None}
        if parsed_args.options is not None:
            changes['options'] = _options(parsed_args)
        if not changes:
            raise exceptions.CommandError(
                'Nothing to change: give --subscriber, --ttl or --options')
        client = self.app.client_manager.zaqar_filtering
        client.request('PATCH', self.subscriptions_path(
            parsed_args, parsed_args.subscription_id), json=changes)
        return super().take_action(parsed_args)


class DeleteTopicSubscription(OfTopic, command.Command):
    """Delete a subscription of a topic"""

    _description = ('Delete a subscription of a topic, with the deliveries '
                    'it has pending.')

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        self.add_subscription(parser)
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        client.request('DELETE', self.subscriptions_path(
            parsed_args, parsed_args.subscription_id))


class ListTopicSubscriptions(OfTopic, command.Lister):
    """List the subscriptions of a topic"""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        self.add_source(parser)
        common.add_page_size(parser, 'Subscriptions')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.zaqar_filtering
        found = common.pages(client, 'GET',
                             self.subscriptions_path(parsed_args),
                             lambda page: page['subscriptions'],
                             parsed_args.page_size)
        return SUBSCRIPTION_COLUMNS, [_subscription_row(sub)
                                      for sub in found]


class MatchTopicSubscriptions(OfTopic, subscription.MatchSubscriptions):
    """Tell who would receive a message, and why the others would not"""

    _description = ('Tell which subscriptions of a topic would receive a '
                    'message, and why each of the others would not. Nothing '
                    'is published or delivered.')


class ShowTopicSubscriptionDeliveries(
        OfTopic, subscription.ShowSubscriptionDeliveries):
    """Show a topic subscription's pending and finished deliveries"""
