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

"""Each queue's compiled Matcher, cached and rebuilt only after a change.

The subscription stage reports changes (:func:`invalidate`); a queue whose
subscriptions changed is re-listed for the next post. The stage runs before
Zaqar writes the change, so for a short settling time after a change the
matcher is rebuilt for every post instead of cached. Entries also expire
after ``[filtering] matcher_cache_seconds`` (changes made through another
server process) and when their first subscription's ttl runs out.
"""

import dataclasses
import threading
import time
from urllib import parse as urllib_parse
import weakref

from oslo_log import log as logging

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import Matcher
from zaqar_filtering.policy.subscription import OPTIONS as FILTER_OPTIONS

LOG = logging.getLogger(__name__)

#: How long after a change a queue's matcher is not cached, in seconds.
SETTLING_SECONDS = 2.0
#: Subscriptions listed per storage call while building a matcher.
PAGE_SIZE = 1000

_CACHES = weakref.WeakSet()
_CACHES_LOCK = threading.Lock()


def invalidate(project, queue):
    """Tell every cache of this process that a queue changed."""
    with _CACHES_LOCK:
        caches = list(_CACHES)
    for cache in caches:
        cache.invalidate(project, queue)


def for_delivery(subscription):
    """Return what delivery reads of a subscription listed by Zaqar.

    The filter options and the ttl are left out: the matcher has them, and
    every post hands its matching subscriptions over for delivery.
    """
    options = subscription.get('options') or {}
    return {'id': subscription['id'], 'source': subscription['source'],
            'subscriber': subscription['subscriber'],
            'confirmed': subscription.get('confirmed', True),
            'options': {key: value for key, value in options.items()
                        if key not in FILTER_OPTIONS}}


@dataclasses.dataclass(frozen=True)
class QueueMatcher:
    """A queue's Matcher and the subscriptions it was built from.

    :ivar subscriptions: dict of subscription id -> the subscription as
        delivery reads it (see :func:`for_delivery`).
    :ivar schemes: dict of subscription id -> its subscriber's URI scheme.
    """
    matcher: Matcher
    subscriptions: dict
    schemes: dict
    valid_until: float


class MatcherCache:
    """Per-queue matchers built from Zaqar's subscription controller.

    :param subscription_controller: Zaqar's storage controller.
    :param limits: the :class:`Limits` policies are checked against.
    :param max_age: seconds an entry is trusted without a change notice.
    :param clock: a monotonic clock (injected by tests).
    """

    def __init__(self, subscription_controller, limits, max_age,
                 clock=time.monotonic):
        self._subscriptions = subscription_controller
        self._limits = limits
        self._max_age = max_age
        self._clock = clock
        self._entries = {}
        self._settling = {}
        with _CACHES_LOCK:
            _CACHES.add(self)

    def invalidate(self, project, queue):
        """Forget a queue's matcher; rebuild it for the next posts."""
        key = (project, queue)
        self._settling[key] = self._clock() + SETTLING_SECONDS
        self._entries.pop(key, None)

    def get(self, project, queue):
        """Return the :class:`QueueMatcher` of a queue."""
        key = (project, queue)
        now = self._clock()
        entry = self._entries.get(key)
        if entry is not None and now < entry.valid_until:
            return entry
        entry = self._build(project, queue, now)
        if now >= self._settling.get(key, 0):
            self._settling.pop(key, None)
            self._entries[key] = entry
        return entry

    def _build(self, project, queue, now):
        matcher = Matcher(self._limits)
        subscriptions = {}
        schemes = {}
        valid_until = now + self._max_age
        marker = None
        while True:
            pages = self._subscriptions.list(queue, project, marker=marker,
                                             limit=PAGE_SIZE)
            for sub in next(pages):
                try:
                    matcher.add(sub['id'], sub.get('options'))
                except InvalidPolicy as exc:
                    # Delivering would ignore the subscriber's filter.
                    LOG.warning('Subscription %(id)s of queue %(queue)s '
                                '(project %(project)s) is not notified: '
                                'its policy is invalid: %(reason)s',
                                {'id': sub['id'], 'queue': queue,
                                 'project': project, 'reason': exc})
                    continue
                subscriptions[sub['id']] = for_delivery(sub)
                schemes[sub['id']] = urllib_parse.urlsplit(
                    sub['subscriber']).scheme
                valid_until = min(valid_until,
                                  now + sub['ttl'] - sub['age'])
            marker = next(pages)
            if not marker:
                break
        LOG.debug('Built the matcher of queue %(queue)s (project '
                  '%(project)s): %(count)d subscriptions in %(ms).1f ms',
                  {'queue': queue, 'project': project,
                   'count': len(subscriptions),
                   'ms': (self._clock() - now) * 1000})
        return QueueMatcher(matcher, subscriptions, schemes, valid_until)
