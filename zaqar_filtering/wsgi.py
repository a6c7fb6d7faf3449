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

"""The WSGI application ``zaqar_filtering.wsgi:application``.

The counterpart of Zaqar's ``zaqar.transport.wsgi.app:application`` for
WSGI containers (uWSGI, mod_wsgi, gunicorn), serving Zaqar's API with the
message filter fields kept. For example::

    uwsgi --http 127.0.0.1:8888 --module zaqar_filtering.wsgi:application

Like Zaqar's, the application is built when this module is imported, from
the global ``oslo.config`` configuration of project ``zaqar``. Zaqar's own
application reads only the standard locations (``/etc/zaqar/zaqar.conf``,
``~/.zaqar/zaqar.conf``, ...); here the environment variable
``ZAQAR_FILTERING_CONFIG_FILES``, a comma-separated list of paths, names the
files to read instead. A missing file is an error.
"""

import os

from oslo_config import cfg
from oslo_log import log
from oslo_reports import guru_meditation_report as gmr
from oslo_reports import opts as gmr_opts
from zaqar.common import consts
from zaqar.conf import drivers as driver_opts
from zaqar import version

from zaqar_filtering import server

CONFIG_FILES_ENV = 'ZAQAR_FILTERING_CONFIG_FILES'


def config_files(environ=os.environ):
    """Return the configuration files that ``environ`` names, or None."""
    value = environ.get(CONFIG_FILES_ENV, '')
    files = [path.strip() for path in value.split(',') if path.strip()]
    return files or None


def init_application(conf=cfg.CONF):
    """Parse the configuration and return Zaqar's WSGI application."""
    gmr_opts.set_defaults(conf)
    log.register_options(conf)
    conf(project='zaqar', prog='zaqar-filtering-wsgi', args=[],
         default_config_files=config_files())
    log.setup(conf, 'zaqar')

    gmr.TextGuruMeditation.setup_autorun(version, conf=conf)

    boot = server.Bootstrap(conf)
    # A WSGI container serves the WSGI transport, whatever the file says.
    conf.set_override('transport', consts.TRANSPORT_WSGI,
                      group=driver_opts.GROUP_NAME)
    return boot.transport.app


application = init_application()
