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

from zaqar import bootstrap
from zaqar.storage import pooling
from zaqar.storage import utils as storage_utils

#: Subscriptions listed per storage call.
PAGE_SIZE = 1000


def data_driver(conf):
    """Return Zaqar's data driver (pooled or not) for ``conf``."""
    boot = bootstrap.Bootstrap(conf)
    if conf.pooling:
        return pooling.DataDriver(conf, boot.cache, boot.control)
    return storage_utils.load_storage_driver(conf, boot.cache,
                                             control_driver=boot.control)


def list_subscriptions(controller, project, queue):
    """Yield every subscription of a queue, a page per storage call."""
    marker = None
    while True:
        pages = controller.list(queue, project, marker=marker,
                                limit=PAGE_SIZE)
        yield from next(pages)
        marker = next(pages)
        if not marker:
            return
