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

"""``zaqar-filtering-export``: subscriptions as JSON Lines for the backfill.

Example::

    zaqar-filtering-export --config-file /etc/zaqar/zaqar.conf \\
        --output subscriptions.jsonl

Reads every subscription of every project's queues and topics through
Zaqar's own storage driver (any backend) and writes one line per
subscription: ``id``, ``source`` (the queue name, or ``topic:NAME`` for a
topic's), ``subscriber``, ``ttl`` (seconds left), ``options`` and
``project``, the input of ``spark/backfill_policies.py --source``.
"""

import json
import sys

from oslo_config import cfg

from zaqar_filtering import opts
from zaqar_filtering.store.base import StoreUnavailable
from zaqar_filtering import topic_store
from zaqar_filtering import zaqar_storage

CLI_OPTS = [
    cfg.StrOpt('output', default='-',
               help='File to write the JSON Lines to; - for stdout.'),
]


def _sources(conf, drivers):
    """Yield (project, source) of every project's queues and topics."""
    topics = topic_store.available(conf, drivers.data)
    projects = set(zaqar_storage.all_projects(conf, drivers.control))
    if topics is not None:
        projects.update(topics.projects())
    for project in sorted(projects,
                          key=lambda project: project or ''):
        for queue in zaqar_storage.list_queues(drivers.control, project):
            yield project, queue
        if topics is not None:
            for topic in topics.all_names(project):
                yield project, topic_store.source_of(topic)


def export_lines(conf, drivers):
    """Yield one JSON line per subscription of every queue and topic."""
    controller = drivers.data.subscription_controller
    for project, queue in _sources(conf, drivers):
        for sub in zaqar_storage.list_subscriptions(controller, project,
                                                    queue):
            yield json.dumps(
                {'id': str(sub['id']), 'source': queue,
                 'subscriber': sub['subscriber'],
                 'ttl': sub['ttl'] - sub.get('age', 0),
                 'options': sub.get('options') or {},
                 'project': project}, sort_keys=True)


def _write(conf, drivers, out):
    count = 0
    for line in export_lines(conf, drivers):
        out.write(line + '\n')
        count += 1
    return count


def main(argv=None, conf=None):
    """Run the command line; return the exit status."""
    conf = conf or cfg.ConfigOpts()
    opts.register_opts(conf)
    conf.register_cli_opts(CLI_OPTS)
    conf(sys.argv[1:] if argv is None else argv, project='zaqar',
         prog='zaqar-filtering-export')
    try:
        drivers = zaqar_storage.load(conf)
        if conf.output == '-':
            count = _write(conf, drivers, sys.stdout)
        else:
            with open(conf.output, 'w') as out:
                count = _write(conf, drivers, out)
    except (ValueError, OSError, StoreUnavailable) as exc:
        sys.stderr.write('zaqar-filtering-export: error: %s\n' % exc)
        return 2
    sys.stderr.write('%d subscriptions exported\n' % count)
    return 0


def run():
    """The console script's entry point."""
    sys.exit(main())
