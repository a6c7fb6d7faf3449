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

"""The ``openstack.cli.extension`` hooks: how ``openstack`` makes our client.

``openstack`` calls :func:`build_option_parser` to add global options and
:func:`make_client` on first use of ``client_manager.zaqar_filtering``.
"""

import uuid

from osc_lib import exceptions
from osc_lib import utils

API_NAME = 'zaqar_filtering'
API_VERSION_OPTION = 'os_zaqar_filtering_api_version'
API_VERSIONS = {'2': 'zaqar_filtering.osc.plugin.Client'}
DEFAULT_API_VERSION = '2'
SERVICE_TYPE = 'messaging'


class Client:
    """Zaqar's v2 API through the keystoneauth session of ``openstack``.

    :param session: a keystoneauth ``Session``.
    :param endpoint: the messaging endpoint, e.g. ``http://host:8888``.
    :param project_id: sent as ``X-Project-ID`` (Zaqar needs it without
        Keystone; with Keystone the token's project wins).
    :param client_id: sent as ``Client-ID``; a new UUID by default.
    """

    def __init__(self, session, endpoint, project_id=None, client_id=None):
        self.session = session
        self.endpoint = endpoint.rstrip('/')
        self.headers = {'Client-ID': client_id or str(uuid.uuid4()),
                        'Accept': 'application/json'}
        if project_id:
            self.headers['X-Project-ID'] = project_id

    def request(self, method, path, **kwargs):
        """Return the JSON answer of a request, None for an empty one.

        :param path: the path under the endpoint, or a link Zaqar gave.
        :raises osc_lib.exceptions.CommandError: naming the status, Zaqar's
            title and its description.
        """
        url = path if '://' in path else self.endpoint + path
        response = self.session.request(url, method, headers=self.headers,
                                        raise_exc=False, **kwargs)
        if response.status_code >= 400:
            raise exceptions.CommandError(error_text(response))
        if response.status_code == 204 or not response.content:
            return None
        return response.json()


def error_text(response):
    """Return ``<status> <title>: <description>`` of an error answer."""
    try:
        document = response.json()
    except ValueError:
        document = None
    if isinstance(document, dict) and 'description' in document:
        return '%d %s: %s' % (response.status_code,
                              document.get('title', response.reason),
                              document['description'])
    return '%d %s: %s' % (response.status_code, response.reason,
                          response.text.strip()[:500])


def make_client(instance):
    """Return the :class:`Client` for ``openstack``'s client manager."""
    endpoint = instance.get_endpoint_for_service_type(
        SERVICE_TYPE, region_name=instance.region_name,
        interface=instance.interface)
    if not endpoint:
        raise exceptions.CommandError(
            'No %s endpoint: the service catalog has none, or give '
            '--os-endpoint with --os-auth-type none.' % SERVICE_TYPE)
    config = instance.get_configuration()
    project_id = config.get('messaging_project_id')
    if instance.auth_ref is not None:
        project_id = instance.auth_ref.project_id
    return Client(instance.session, endpoint, project_id)


def build_option_parser(parser):
    """Add the global option that selects the API version."""
    parser.add_argument(
        '--os-zaqar-filtering-api-version',
        metavar='<version>',
        default=utils.env('OS_ZAQAR_FILTERING_API_VERSION',
                          default=DEFAULT_API_VERSION),
        help='zaqar-filtering API version, default=%s '
             '(Env: OS_ZAQAR_FILTERING_API_VERSION)' % DEFAULT_API_VERSION)
    parser.add_argument(
        '--os-messaging-project-id',
        metavar='<project-id>',
        default=utils.env('OS_MESSAGING_PROJECT_ID'),
        help='Project to act in when Zaqar runs without authentication '
             '(--os-auth-type none), sent as X-Project-ID; with Keystone the '
             'token\'s project is used (Env: OS_MESSAGING_PROJECT_ID)')
    return parser
