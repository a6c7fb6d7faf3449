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
``deliveries`` tell what the delivery ledger holds for it; a queue's
``subscriptions/match`` tells who would receive a message, and why not;
subscription changes refused while the policy store is down say so;
queue metadata may make a queue ordered by key;
``queue:`` subscribers are accepted; the topic routes are ours
(:mod:`zaqar_filtering.api.topics`).
"""

from zaqar.transport.wsgi import driver

from zaqar_filtering.api import deliveries
from zaqar_filtering.api import match
from zaqar_filtering.api import messages
from zaqar_filtering.api import subscriptions
from zaqar_filtering.api import topics
from zaqar_filtering.api import validation
from zaqar_filtering import opts
from zaqar_filtering.stages import notifier
from zaqar_filtering import store as policy_store
from zaqar_filtering import topic_store

# The v2 route of the messages collection, as Zaqar declares it
# (zaqar.transport.wsgi.v2_0.public_endpoints). Adding a route with the
# same template replaces the resource.
MESSAGES_ROUTE = '/v2/queues/{queue_name}/messages'
SUBSCRIPTIONS_ROUTE = '/v2/queues/{queue_name}/subscriptions'
SUBSCRIPTION_ROUTE = SUBSCRIPTIONS_ROUTE + '/{subscription_id}'


class Driver(driver.Driver):
    """Zaqar's WSGI driver with the filtering resources.

    Every other route, the hooks and the middleware (auth, CORS, request
    IDs, profiling) are Zaqar's own.
    """

    def _init_routes(self):
        # Zaqar's validator, with queue: subscribers and
        # the ordered-queue flag; the routes take it.
        self._validate = validation.Validator(self._conf)
        super()._init_routes()
        # Zaqar wraps self.app in its middleware only after this method
        # returns, so self.app is still the bare falcon.App here.
        opts.register_opts(self._conf)
        storage = self._storage
        limits = opts.limits_from_conf(self._conf)
        self.app.add_route(MESSAGES_ROUTE, messages.MessagesResource(
            self._wsgi_conf,
            self._validate,
            storage.message_controller,
            storage.queue_controller,
            self._defaults.message_ttl,
            self._encryptor_factory,
            limits=limits))
        self.app.add_route(SUBSCRIPTIONS_ROUTE,
                           subscriptions.CollectionResource(
                               self._validate, storage.subscription_controller,
                               self._defaults.subscription_ttl,
                               storage.queue_controller, self._conf))
        self.app.add_route(SUBSCRIPTION_ROUTE, subscriptions.ItemResource(
            self._validate, storage.subscription_controller))
        self.app.add_route(SUBSCRIPTION_ROUTE + '/confirm',
                           subscriptions.ConfirmResource(
                               self._validate, storage.subscription_controller,
                               self._conf))
        self.app.add_route(match.ROUTE, match.MatchResource(
            self._validate, storage.subscription_controller,
            storage.queue_controller, self._defaults.message_ttl, limits,
            self._conf.notification.require_confirmation))
        self.app.add_route(deliveries.ROUTE, deliveries.DeliveriesResource(
            storage.subscription_controller,
            policy_store.shared_store(self._conf).delivery_ledger()))
        self._init_topic_routes()

    def _init_topic_routes(self):
        # Replaces Zaqar's topic routes (same templates).
        ledger = policy_store.shared_store(self._conf).delivery_ledger()
        self._topics = topic_store.LazyTopics(self._conf)
        for route, resource in topics.routes(
                self, self._topics, ledger,
                self._topic_stage, opts.limits_from_conf(self._conf)):
            self.app.add_route(route, resource)

    def _topic_stage(self):
        """Return a notifier stage delivering topic messages."""
        # Zaqar's own controllers, without the pipeline, as the message
        # pipeline hands them to its stages.
        raw = getattr(self._storage, '_storage', self._storage)
        return notifier.NotifierStage(
            subscription_controller=raw.subscription_controller,
            queue_controller=topics.TopicsAsQueues(self._topics,
                                                   sources=True),
            max_notifier_workers=self._conf.notification.max_notifier_workers,
            require_confirmation=(
                self._conf.notification.require_confirmation))
