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

"""``zaqar-filtering-server``: ``zaqar-server`` keeping message filter fields.

A drop-in replacement for ``zaqar-server``: the same options
(``--config-file``, ``--config-dir``, ``--daemon``, logging options) and the
same configuration; only the WSGI transport differs (see
:mod:`zaqar_filtering.api`). With ``[drivers] transport = websocket`` it
serves Zaqar's stock websocket transport.
"""

from zaqar import bootstrap
from zaqar.cmd import server as zaqar_server
from zaqar.common import consts
from zaqar.common import decorators

from zaqar_filtering.api import driver


class Bootstrap(bootstrap.Bootstrap):
    """Zaqar's bootstrap, with the filtering WSGI transport driver."""

    @decorators.lazy_property(write=False)
    def transport(self):
        if self.driver_conf.transport != consts.TRANSPORT_WSGI:
            return super().transport
        return driver.Driver(self.conf, self.storage, self.cache,
                             self.control)


def main():
    """Run ``zaqar-server`` with :class:`Bootstrap`.

    ``zaqar.cmd.server.run`` looks ``bootstrap.Bootstrap`` up when it is
    called, so pointing that name at our subclass is all it takes to keep
    Zaqar's command line, logging, Guru Meditation reports and
    daemonization as they are.
    """
    bootstrap.Bootstrap = Bootstrap
    zaqar_server.run()
