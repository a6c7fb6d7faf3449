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

"""``zaqar-filtering-manage``: sync and verify the policy store.

Examples::

    zaqar-filtering-manage --config-file /etc/zaqar/zaqar.conf sync --all
    zaqar-filtering-manage --config-file /etc/zaqar/zaqar.conf \\
        sync --project 7d3c... --queue orders
    zaqar-filtering-manage --config-file /etc/zaqar/zaqar.conf verify --all
    zaqar-filtering-manage --config-file /etc/zaqar/zaqar.conf \
        deliveries --project 7d3c... [--queue orders]

``sync`` writes every subscription's policy to the store, deletes records
of subscriptions that are gone, lands changes left in flight by a server
process that stopped, and lists the subscriptions whose policy is invalid.
``verify`` only reports: the invalid policies (under every store), and,
with a store that keeps records, missing, stale and orphaned records.
``deliveries`` prints, per subscription, the webhook deliveries pending in
the delivery ledger (waiting or being retried), how many were delivered,
dropped after their last retry or dropped when their lifecycle ended, and
the last error.

Exit status: 0 when nothing needs attention; 1 when ``sync`` or ``verify``
found an invalid policy, or ``verify`` a missing, stale or orphaned
record; 2 on an error (wrong arguments, a store that cannot be reached).
"""

import datetime
import sys

from oslo_config import cfg

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import opts
from zaqar_filtering.store.base import StoreUnavailable
from zaqar_filtering.store import load_store
from zaqar_filtering.store.record import record_from_listing
from zaqar_filtering.store.sync import sync_queue
from zaqar_filtering import topic_store
from zaqar_filtering import zaqar_storage


def _add_selection(parser):
    parser.add_argument('--project', action='append', default=[],
                        help='A project (tenant) id; repeat for several.')
    _add_source(parser, 'of the project')
    parser.add_argument('--all', action='store_true',
                        help='Every queue and topic of every project.')


def _add_source(parser, where):
    group = parser.add_mutually_exclusive_group()
    group.add_argument('--queue', help='Only this queue %s.' % where)
    group.add_argument('--topic', help='Only this topic %s.' % where)


def _add_commands(subparsers):
    sync = subparsers.add_parser(
        'sync', help='Write the subscriptions\' policies to the store.')
    _add_selection(sync)
    sync.set_defaults(run=_sync)
    verify = subparsers.add_parser(
        'verify', help='Report invalid policies, and how the store differs '
                       'from the subscriptions, without writing.')
    _add_selection(verify)
    verify.set_defaults(run=_verify)
    deliveries = subparsers.add_parser(
        'deliveries', help='Show pending webhook deliveries and their last '
                           'errors, per subscription.')
    deliveries.add_argument('--project', action='append', default=[],
                            help='A project (tenant) id; repeat for several. '
                                 'Every project when not given.')
    _add_source(deliveries, '(of every project given)')
    deliveries.set_defaults(run=_deliveries)


COMMAND = cfg.SubCommandOpt('command', title='Commands',
                            handler=_add_commands)


def _chosen_source(args):
    """Return the source ``--queue`` or ``--topic`` names, or None."""
    if args.topic:
        return topic_store.source_of(args.topic)
    return args.queue


def _sources(conf, store, drivers):
    """Return the chosen (project, source) pairs: queues and topics."""
    args = conf.command
    if args.all == bool(args.project):
        raise ValueError('give either --all or --project')
    source = _chosen_source(args)
    if source:
        if len(args.project) != 1:
            raise ValueError('--%s needs exactly one --project'
                             % ('topic' if args.topic else 'queue'))
        return [(args.project[0], source)]
    topics = topic_store.available(conf, drivers.data)
    projects = set(args.project or zaqar_storage.all_projects(
        conf, drivers.control))
    if args.all and topics is not None:
        projects.update(topics.projects())
    found = set()
    for project in projects:
        found.update((project, queue) for queue in
                     zaqar_storage.list_queues(drivers.control, project))
        if topics is not None:
            found.update((project, topic_store.source_of(topic))
                         for topic in topics.all_names(project))
        if not args.all:
            found.update(store.queues(project))
    if args.all:
        found.update(store.queues())
    return sorted(found, key=lambda pair: (pair[0] or '', pair[1]))


def _where(source):
    """Return ``queue=NAME`` or ``topic=NAME`` of a subscription source."""
    topic = topic_store.topic_of(source)
    return 'queue=%s' % source if topic is None else 'topic=%s' % topic


def _listing(drivers, project, queue):
    return list(zaqar_storage.list_subscriptions(
        drivers.data.subscription_controller, project, queue))


def _sync(conf, store, drivers, limits, out):
    total = {'written': 0, 'unchanged': 0, 'deleted': 0, 'invalid': 0}
    out.write('%-34s %-24s %8s %9s %8s %8s\n' % (
        'project', 'queue', 'written', 'unchanged', 'deleted', 'invalid'))
    for project, queue in _sources(conf, store, drivers):
        result = sync_queue(store, project, queue,
                            _listing(drivers, project, queue), limits)
        version = store.version(project, queue)
        if version is not None and version.started > version.landed:
            store.changes_landed(project, queue, version.started)
        out.write('%-34s %-24s %8d %9d %8d %8d\n' % (
            project, queue, result.written, result.unchanged,
            result.deleted, len(result.invalid)))
        for sub_id, exc in sorted(result.invalid.items()):
            out.write('  invalid %s: %s\n' % (sub_id, exc))
        total['written'] += result.written
        total['unchanged'] += result.unchanged
        total['deleted'] += result.deleted
        total['invalid'] += len(result.invalid)
    out.write('%(written)d written, %(unchanged)d unchanged, %(deleted)d '
              'deleted, %(invalid)d invalid\n' % total)
    if not store.keeps_records:
        out.write('policy_store = %s keeps no copy of the policies: only '
                  'changes left in flight were landed.\n' % store.name)
    return 1 if total['invalid'] else 0


def _verify(conf, store, drivers, limits, out):
    now = datetime.datetime.now(datetime.timezone.utc)
    counts = {'checked': 0, 'missing': 0, 'stale': 0, 'orphaned': 0,
              'invalid': 0}
    for project, queue in _sources(conf, store, drivers):
        kept = store.load(project, queue)
        for sub in _listing(drivers, project, queue):
            counts['checked'] += 1
            sub_id = str(sub['id'])
            problem = _problem(store, kept.pop(sub_id, None),
                               project, queue, sub, now, limits)
            if problem:
                counts[problem[0]] += 1
                out.write('%s project=%s %s subscription=%s: %s\n'
                          % (problem[0], project, _where(queue), sub_id,
                             problem[1]))
        for sub_id, record in sorted(kept.items()):
            counts['orphaned'] += 1
            out.write('orphaned project=%s %s subscription=%s: %s\n'
                      % (project, _where(queue), sub_id, record.subscriber))
    out.write('%(checked)d subscriptions checked: %(invalid)d invalid, '
              '%(missing)d missing, %(stale)d stale, %(orphaned)d orphaned\n'
              % counts)
    if not store.keeps_records:
        out.write('policy_store = %s keeps no copy of the policies: only '
                  'their validity was checked.\n' % store.name)
    del counts['checked']
    return 1 if any(counts.values()) else 0


def _problem(store, kept, project, queue, subscription, now, limits):
    """Return (kind, detail) of what is wrong with a subscription, or None.

    :param kept: the store's record of the subscription, or None.
    """
    try:
        record = record_from_listing(project, queue, subscription, now,
                                     limits)
    except InvalidPolicy as exc:
        return 'invalid', str(exc)
    if not store.keeps_records:
        return None
    if kept is None:
        return 'missing', record.subscriber
    if not kept.same_as(record):
        return 'stale', record.subscriber
    return None


def _deliveries(conf, store, drivers, limits, out):
    ledger = store.delivery_ledger()
    if ledger is None:
        raise ValueError('policy_store = %s keeps no delivery ledger in this '
                         'deployment: webhook retries are not recorded'
                         % store.name)
    args = conf.command
    found = []
    for project in args.project or [None]:
        found += ledger.stats(project, _chosen_source(args))
    out.write('%-24s %-24s %-26s %7s %8s %9s %7s %7s  %s\n' % (
        'project', 'queue', 'subscription', 'pending', 'retrying',
        'delivered', 'dropped', 'expired', 'last error'))
    for stats in found:
        when = ''
        if stats.last_error_at is not None:
            when = datetime.datetime.fromtimestamp(
                stats.last_error_at, datetime.timezone.utc).strftime(
                    ' at %Y-%m-%dT%H:%M:%SZ')
        out.write('%-24s %-24s %-26s %7d %8d %9d %7d %7d  %s\n' % (
            stats.project or '-', stats.queue, stats.subscription_id,
            stats.pending, stats.retrying, stats.delivered, stats.dropped,
            stats.expired, (stats.last_error or '-') + when))
    out.write('%d subscriptions, %d deliveries pending, %d retrying\n'
              % (len(found), sum(s.pending for s in found),
                 sum(s.retrying for s in found)))
    return 0


def main(argv=None, out=sys.stdout, conf=None):
    """Run the command line; return the exit status."""
    conf = conf or cfg.ConfigOpts()
    opts.register_opts(conf)
    conf.register_cli_opt(COMMAND)
    conf(sys.argv[1:] if argv is None else argv, project='zaqar',
         prog='zaqar-filtering-manage')
    try:
        drivers = zaqar_storage.load(conf)
        store = load_store(conf)
        return conf.command.run(conf, store, drivers,
                                opts.limits_from_conf(conf), out)
    except (ValueError, StoreUnavailable) as exc:
        sys.stderr.write('zaqar-filtering-manage: error: %s\n' % exc)
        return 2


def run():
    """The console script's entry point."""
    sys.exit(main())
