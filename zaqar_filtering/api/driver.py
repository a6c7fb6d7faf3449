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

"""Zaqar's WSGI transport driver with the filtering resources.

The messages collection keeps the message filter fields; a subscription's
``deliveries`` tell what the delivery ledger holds for it; queue metadata
may make a queue ordered by key.
"""

from zaqar.transport.wsgi import driver

from zaqar_filtering.api import deliveries
from zaqar_filtering.api import messages
from zaqar_filtering.api import ordering
from zaqar_filtering import opts
from zaqar_filtering import store as policy_store

# The v2 route of the messages collection, as Zaqar declares it
# (zaqar.transport.wsgi.v2_0.public_endpoints). Adding a route with the
# same template replaces the resource.
MESSAGES_ROUTE = '/v2/queues/{queue_name}/messages'


class Driver(driver.Driver):
    """Zaqar's WSGI driver with the filtering resources.

    Every other route, the hooks and the middleware (auth, CORS, request
    IDs, profiling) are Zaqar's own.
    """

    def _init_routes(self):
        self._validate = ordering.Validator(self._conf)
        super()._init_routes()
        # Zaqar wraps self.app in its middleware only after this method
        # returns, so self.app is still the bare falcon.App here.
        opts.register_opts(self._conf)
        storage = self._storage
        self.app.add_route(MESSAGES_ROUTE, messages.MessagesResource(
            self._wsgi_conf,
            self._validate,
            storage.message_controller,
            storage.queue_controller,
            self._defaults.message_ttl,
            self._encryptor_factory,
            limits=opts.limits_from_conf(self._conf)))
        self.app.add_route(deliveries.ROUTE, deliveries.DeliveriesResource(
            storage.subscription_controller,
            policy_store.shared_store(self._conf).delivery_ledger()))
