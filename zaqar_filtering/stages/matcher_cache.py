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

"""Each queue's compiled Matcher, cached until its subscriptions change.

Before every post the cache reads the queue's version from the policy
store (see :mod:`zaqar_filtering.store.versions`): the subscription stage
moves it for every change, in whichever server process the change is made,
so the next post everywhere rebuilds the matcher from the queue's
subscriptions. While a change is in flight (Zaqar runs the stage before it
writes), the matcher is rebuilt for every post and not cached. Entries
also end when their first subscription's ttl runs out, and are rebuilt in
the background after ``[filtering] matcher_cache_seconds``.

Without a shared version (a store that has no place for it) changes made
through this process still apply to the next post (:func:`invalidate`),
and changes made through others within ``matcher_cache_seconds``. While
the store cannot be reached, the matcher is rebuilt for every post: slower,
but never stale.
"""

from concurrent import futures
import dataclasses
import threading
import time
from urllib import parse as urllib_parse
import weakref

from oslo_log import log as logging

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import Matcher
from zaqar_filtering.policy.subscription import OPTIONS as FILTER_OPTIONS
from zaqar_filtering.store.base import StoreUnavailable
from zaqar_filtering import zaqar_storage

LOG = logging.getLogger(__name__)

#: Without a shared version: how long after a change made through this
#: process its queue's matcher is not cached, in seconds.
SETTLING_SECONDS = 2.0
#: How long a change may stay in flight before matchers are cached anyway,
#: in seconds: the process that made it stopped before it landed.
IN_FLIGHT_LIMIT_SECONDS = 30.0

_CACHES = weakref.WeakSet()
_CACHES_LOCK = threading.Lock()
#: What the store answered when it could not be reached.
_UNAVAILABLE = object()


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
    :ivar version: the queue's version it was built at.
    :ivar valid_until: when its first subscription expires.
    :ivar refresh_at: when it is rebuilt in the background.
    """
    matcher: Matcher
    subscriptions: dict
    schemes: dict
    version: object
    valid_until: float
    refresh_at: float


class MatcherCache:
    """Per-queue matchers built from Zaqar's subscription controller.

    :param subscription_controller: Zaqar's storage controller.
    :param limits: the :class:`Limits` policies are checked against.
    :param max_age: seconds before an entry is rebuilt in the background.
    :param store: the policy store that keeps the queue versions.
    :param clock: a monotonic clock (injected by tests).
    :param executor: runs background rebuilds (one thread by default).
    """

    def __init__(self, subscription_controller, limits, max_age, store,
                 clock=time.monotonic, executor=None):
        self._subscriptions = subscription_controller
        self._limits = limits
        self._max_age = max_age
        self._store = store
        self._clock = clock
        self._executor = executor or futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix='zaqar-filtering-matcher')
        self._entries = {}
        self._settling = {}
        self._in_flight = {}
        self._refreshing = set()
        self._outage = False
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
        version = self._version(project, queue)
        if version is _UNAVAILABLE:
            return self._build(project, queue, now, version)
        entry = self._entries.get(key)
        if (entry is not None and entry.version == version
                and now < entry.valid_until):
            if now >= entry.refresh_at:
                self._refresh_later(key, version)
            return entry
        entry = self._build(project, queue, now, version)
        if self._cacheable(key, version, now):
            self._entries[key] = entry
        return entry

    def _version(self, project, queue):
        try:
            version = self._store.version(project, queue)
        except StoreUnavailable as exc:
            if not self._outage:
                self._outage = True
                LOG.warning('%s. Until it is back, every post lists its '
                            'queue\'s subscriptions to match with their own '
                            'options.', exc)
            return _UNAVAILABLE
        if self._outage:
            # Entries from before the outage may have missed a change.
            self._entries.clear()
            self._outage = False
            LOG.warning('The policy store %s is back; queue matchers are '
                        'cached again.', self._store.name)
        return version

    def _cacheable(self, key, version, now):
        if version is None:
            # No shared version: only this process's own changes are known.
            if now < self._settling.get(key, 0):
                return False
            self._settling.pop(key, None)
            return True
        if version.started <= version.landed:
            self._in_flight.pop(key, None)
            return True
        started, since = self._in_flight.get(key, (None, now))
        if started != version.started:
            self._in_flight[key] = (version.started, now)
            return False
        if now - since < IN_FLIGHT_LIMIT_SECONDS:
            return False
        LOG.warning('A change of queue %(queue)s (project %(project)s) '
                    'has not landed after %(limit)d s: its matcher is '
                    'cached anyway. Run "zaqar-filtering-manage sync '
                    '--project %(project)s --queue %(queue)s".',
                    {'project': key[0], 'queue': key[1],
                     'limit': IN_FLIGHT_LIMIT_SECONDS})
        return True

    def _refresh_later(self, key, version):
        if key in self._refreshing:
            return
        self._refreshing.add(key)
        self._executor.submit(self._refresh, key, version)

    def _refresh(self, key, version):
        try:
            entry = self._build(key[0], key[1], self._clock(), version)
            current = self._entries.get(key)
            if current is not None and current.version == version:
                self._entries[key] = entry
        except Exception:
            LOG.exception('Could not rebuild the matcher of queue %(queue)s '
                          '(project %(project)s) in the background',
                          {'project': key[0], 'queue': key[1]})
        finally:
            self._refreshing.discard(key)

    def _build(self, project, queue, now, version):
        matcher = Matcher(self._limits)
        subscriptions = {}
        schemes = {}
        valid_until = float('inf')
        for sub in zaqar_storage.list_subscriptions(self._subscriptions,
                                                    project, queue):
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
            valid_until = min(valid_until, now + sub['ttl'] - sub['age'])
        LOG.debug('Built the matcher of queue %(queue)s (project '
                  '%(project)s): %(count)d subscriptions in %(ms).1f ms',
                  {'queue': queue, 'project': project,
                   'count': len(subscriptions),
                   'ms': (self._clock() - now) * 1000})
        return QueueMatcher(matcher, subscriptions, schemes, version,
                            valid_until, now + self._max_age)
