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

"""Zaqar's own storage driver, built from zaqar.conf as zaqar-server does.

For the tools and background jobs that read subscriptions outside a
request: the driver has no pipeline, so none of the stages run.
"""

import collections

import sqlalchemy as sa
from zaqar import bootstrap
from zaqar.storage import pooling
from zaqar.storage.sqlalchemy import tables
from zaqar.storage import utils as storage_utils

#: Subscriptions listed per storage call.
PAGE_SIZE = 1000


#: Zaqar's data driver (subscriptions) and control driver (queues).
Drivers = collections.namedtuple('Drivers', 'data control')


def load(conf):
    """Return Zaqar's :class:`Drivers` for ``conf``, pooled or not."""
    boot = bootstrap.Bootstrap(conf)
    if conf.pooling:
        data = pooling.DataDriver(conf, boot.cache, boot.control)
    else:
        data = storage_utils.load_storage_driver(conf, boot.cache,
                                                 control_driver=boot.control)
    return Drivers(data, boot.control)


def data_driver(conf):
    """Return Zaqar's data driver (pooled or not) for ``conf``."""
    return load(conf).data


def list_subscriptions(controller, project, queue):
    """Yield every subscription of a queue, a page per storage call."""
    return _follow_markers(
        lambda marker: controller.list(queue, project, marker=marker,
                                       limit=PAGE_SIZE),
        lambda subscription: str(subscription['id']))


def list_queues(control, project):
    """Yield the names of a project's queues, a page per storage call."""
    found = _follow_markers(
        lambda marker: control.queue_controller.list(
            project=project, marker=marker, limit=PAGE_SIZE),
        lambda queue: queue['name'])
    return (queue['name'] for queue in found)


def _follow_markers(list_page, key):
    """Yield the items of every page of a Zaqar listing, each once.

    :param list_page: called with the marker (None first); returns Zaqar's
        generator of a page's items, then the next marker.
    :param key: the identity of an item.

    Zaqar's drivers do not all end a listing cleanly: the redis queue
    controller restarts from the top when the marker ranks first
    (``start = rank + 1 if rank else 0``), so a project with one queue
    gets the same page forever. The listing therefore ends at the first
    page without a marker, with a marker seen before, or with nothing new.
    A short page does not end it: the redis subscription controller skips
    expired subscriptions, so its pages can be short in mid-listing.
    """
    seen = set()
    markers = set()
    marker = None
    while True:
        pages = list_page(marker)
        new = 0
        for item in next(pages):
            identity = key(item)
            if identity not in seen:
                seen.add(identity)
                new += 1
                yield item
        marker = next(pages)
        if not new or not marker or marker in markers:
            return
        markers.add(marker)


def all_projects(conf, control):
    """Return the projects that have queues in Zaqar's management store.

    :raises ValueError: for a management store this cannot read.
    """
    backend = conf['drivers'].management_store
    if backend == 'sqlalchemy':
        with control.engine.connect() as connection:
            rows = connection.execute(
                sa.select(tables.Queues.c.project).distinct())
            return sorted({row[0] for row in rows}, key=_project_order)
    if backend == 'mongodb':
        names = control.queues_database.queues.distinct('p_q')
        return sorted({name.split('/', 1)[0] or None for name in names},
                      key=_project_order)
    if backend == 'redis':
        suffix = '.queues_set'
        keys = control.connection.scan_iter(match='*' + suffix)
        return sorted({key.decode()[:-len(suffix)] or None for key in keys},
                      key=_project_order)
    raise ValueError('cannot list the projects of the %s management store: '
                     'name them with --project' % backend)


def _project_order(project):
    return project or ''
