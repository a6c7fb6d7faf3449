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

"""The ``zaqar_filtering.ordering`` stage: ordered queues (EMQ TopicQueue).

Configured in two of Zaqar's storage pipelines::

    [storage]
    message_pipeline = zaqar_filtering.notifier, zaqar_filtering.ordering
    claim_pipeline = zaqar_filtering.ordering

In the message pipeline, ``post`` stores a batch that carries an
``ordering_key`` itself, keys included (a non-None result ends the
pipeline, so it must come after the notifier); other batches go to Zaqar
as usual. In the claim pipeline, ``create`` claims for queues whose
metadata has ``"_ordered_by_key": true``, giving out of each key only the
oldest undeleted message; other queues are claimed by Zaqar as usual.

Zaqar builds claim-pipeline stages without arguments, so that instance
loads its own data driver from the global configuration, as zaqar-server
and zaqar-filtering-server read it. Stores other than redis and MongoDB,
and pooled deployments, are not ordered (the API refuses the flag there).
"""

import threading

from oslo_config import cfg
from oslo_log import log as logging
from zaqar import storage
from zaqar.storage import pooling

from zaqar_filtering import ordering
from zaqar_filtering.policy.ordering import is_ordered
from zaqar_filtering.policy.ordering import ORDERING_KEY
from zaqar_filtering import zaqar_storage

LOG = logging.getLogger(__name__)

#: The entry point name, as zaqar.conf names it.
STAGE_NAME = 'zaqar_filtering.ordering'


class OrderingStage:
    """Message- and claim-pipeline stage of ordered queues.

    :param subscription_controller: Zaqar's subscription controller (given
        in the message pipeline); its driver is the store to order on.
    :param driver: the data driver to order on; by default the one above,
        else one built from ``cfg.CONF`` on first use.
    """

    def __init__(self, subscription_controller=None, driver=None, **kwargs):
        # With pooling, the stage of each pool's pipeline orders; the outer
        # one sees the pooled controllers.
        self._pooled = isinstance(subscription_controller,
                                  pooling.SubscriptionController)
        self._driver = driver or getattr(subscription_controller, 'driver',
                                         None)
        self._backend = None
        self._lock = threading.Lock()

    def _ordering(self):
        with self._lock:
            if self._backend is None:
                driver = self._driver or zaqar_storage.data_driver(cfg.CONF)
                self._backend = ordering.backend_for(driver) or False
                if not self._backend:
                    LOG.warning('Ordered queues are not supported on %s: '
                                'claims are not ordered.',
                                type(driver).__module__)
            return self._backend

    def post(self, queue_name, messages, client_uuid, project=None):
        """Store a batch with ordering keys, keys included."""
        if self._pooled or not any(message.get(ORDERING_KEY)
                                   for message in messages):
            return None
        backend = self._ordering()
        if not backend:
            return None
        return backend.messages.post(queue_name, messages, client_uuid,
                                     project=project)

    def create(self, queue, metadata, project=None,
               limit=storage.DEFAULT_MESSAGES_PER_CLAIM):
        """Claim the oldest message of each key of an ordered queue."""
        backend = self._ordering()
        if not backend:
            return None
        queue_metadata = backend.claims.driver.queue_controller.get(
            queue, project=project)
        if not is_ordered(queue_metadata):
            return None
        return backend.claims.create(queue, metadata, project=project,
                                     limit=limit)
