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

"""``GET /v2/queues/{queue}/subscriptions/{id}/deliveries``.

What a subscription has pending in the delivery ledger and how its
deliveries went: CMQ's "total number of messages associated with
subscriber", with the last error. Only the schemes of
:data:`~zaqar_filtering.delivery.ledger.TRACKED_SCHEMES` are counted; for
the others the answer says ``"tracked": false`` and why, rather than
zeros that would read as "nothing delivered". Reading it takes the same
policy rule as reading the subscription (``subscription:get``).
"""

import datetime

from oslo_log import log as logging
from zaqar.common import decorators
from zaqar.storage import errors as storage_errors
from zaqar.transport import acl
from zaqar.transport import utils
from zaqar.transport.wsgi import errors as wsgi_errors

from zaqar_filtering.delivery import ledger as delivery_ledger
from zaqar_filtering.delivery.ledger import SubscriberStats
from zaqar_filtering.store.base import StoreUnavailable

LOG = logging.getLogger(__name__)

ROUTE = ('/v2/queues/{queue_name}/subscriptions/{subscription_id}'
         '/deliveries')


class DeliveriesResource:
    """A subscription's delivery counts.

    :param subscription_controller: Zaqar's subscription controller.
    :param ledger: the delivery ledger, or None when the store keeps none.
    """

    __slots__ = ('_subscriptions', '_ledger')

    def __init__(self, subscription_controller, ledger):
        self._subscriptions = subscription_controller
        self._ledger = ledger

    @decorators.TransportLog('Subscription deliveries')
    @acl.enforce('subscription:get')
    def on_get(self, req, resp, project_id, queue_name, subscription_id):
        try:
            subscription = self._subscriptions.get(queue_name,
                                                   subscription_id,
                                                   project=project_id)
        except storage_errors.DoesNotExist as exc:
            raise wsgi_errors.HTTPNotFound(str(exc))
        subscriber = subscription['subscriber']
        if not delivery_ledger.tracks(subscriber):
            resp.text = utils.to_json(_untracked(queue_name, subscription_id,
                                                 subscriber))
            return
        if self._ledger is None:
            raise wsgi_errors.HTTPServiceUnavailable(
                'This deployment keeps no delivery ledger: its policy store '
                'has no place shared by every server process (see '
                '[filtering] policy_store).')
        try:
            found = self._ledger.stats(project_id, queue_name,
                                       subscription_id)
        except StoreUnavailable as exc:
            LOG.error('Cannot read delivery counts: %s', exc)
            raise wsgi_errors.HTTPServiceUnavailable(
                'The delivery ledger is unavailable.')
        stats = found[0] if found else SubscriberStats(
            project_id, queue_name, subscription_id, subscriber)
        document = stats.as_dict()
        del document['project']
        document['tracked'] = True
        if stats.last_error_at is not None:
            document['last_error_at'] = datetime.datetime.fromtimestamp(
                stats.last_error_at, datetime.timezone.utc).isoformat()
        resp.text = utils.to_json(document)


def _untracked(queue_name, subscription_id, subscriber):
    scheme = subscriber.split(':', 1)[0]
    return {
        'queue': queue_name, 'subscription_id': subscription_id,
        'subscriber': subscriber, 'tracked': False,
        'description': 'Deliveries to %s subscribers are not counted: '
                       'Zaqar\'s own %s task sends them, outside the '
                       'delivery ledger. Only the deliveries to %s '
                       'subscribers are.' % (
                           scheme, scheme,
                           ' and '.join(sorted(
                               delivery_ledger.TRACKED_SCHEMES)))}
