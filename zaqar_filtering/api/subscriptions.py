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

"""Zaqar's subscription resources, saying so when the policy store is down.

While the policy store cannot be reached, the subscription stage refuses
every change (:mod:`zaqar_filtering.stages.validation`). Zaqar's resources
turn any storage error into "Subscription could not be created." (503) or,
for an update or a confirmation, a 400, which hides the cause and tells a
client not to retry. The resources here are Zaqar's own, unchanged but
for that case: they answer 503 with a description that says the policy
store is unavailable and to retry, and a ``Retry-After`` header.
"""

import functools

import falcon
from zaqar.transport.wsgi.v2_0 import subscriptions

from zaqar_filtering.store.base import StoreUnavailable

#: Seconds a client should wait before it retries a refused change: the
#: store's server selection timeout and a retry of its own fit in it.
RETRY_AFTER_SECONDS = 5


class PolicyStoreUnavailable(falcon.HTTPServiceUnavailable):
    """503: a subscription change refused while the policy store is down."""

    def __init__(self, action):
        super().__init__(
            title='Service temporarily unavailable',
            description='The subscription was not %s: the policy store that '
                        'keeps filter policies is unavailable. Retry in %d '
                        'seconds.' % (action, RETRY_AFTER_SECONDS),
            retry_after=RETRY_AFTER_SECONDS)


def store_outage(exc):
    """Return the :class:`StoreUnavailable` behind an error, or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, StoreUnavailable):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def explains_store_outage(action):
    """Decorate a responder to answer :class:`PolicyStoreUnavailable`.

    Zaqar raises its own HTTP error while handling the store's
    :class:`StoreUnavailable`, which stays its ``__context__``.
    """
    def decorator(responder):
        @functools.wraps(responder)
        def wrapper(*args, **kwargs):
            try:
                return responder(*args, **kwargs)
            except falcon.HTTPError as exc:
                cause = store_outage(exc)
                if cause is None:
                    raise
                raise PolicyStoreUnavailable(action) from cause
        return wrapper
    return decorator


class CollectionResource(subscriptions.CollectionResource):
    """Zaqar's subscriptions collection; see the module."""

    __slots__ = ()

    on_post = explains_store_outage('created')(
        subscriptions.CollectionResource.on_post)


class ItemResource(subscriptions.ItemResource):
    """Zaqar's subscription item; see the module."""

    __slots__ = ()

    on_patch = explains_store_outage('updated')(
        subscriptions.ItemResource.on_patch)
    on_delete = explains_store_outage('deleted')(
        subscriptions.ItemResource.on_delete)


class ConfirmResource(subscriptions.ConfirmResource):
    """Zaqar's subscription confirmation; see the module."""

    __slots__ = ()

    on_put = explains_store_outage('confirmed')(
        subscriptions.ConfirmResource.on_put)
