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

"""Each queue's compiled Matcher, kept up to date change by change.

Before every post the cache reads the queue's version from the policy
store (see :mod:`zaqar_filtering.store.versions`): the subscription stage
moves it for every change, in whichever server process the change is made,
and logs the id of the subscription it concerns. When the version moved,
the cache reads the logged subscriptions again (one storage read each) and
updates the matcher in place, under the entry's lock, which the notifier
also holds while it matches: a change costs the next post a few reads,
whatever the queue's size. A change in flight (Zaqar runs the stage before
it writes) is read again at every post until it lands. The whole queue is
listed only to build an entry (at the first post to it, when the log no
longer reaches back to the entry, or for a change whose subscriptions are
not known), and in the background every :data:`LOGGED_LISTING_SECONDS`
(for changes made around the stages), which updates the entry in place. Expired
subscriptions are dropped as their ttl runs out.

Without a shared version (a store that has no place for it) changes made
through this process still apply to the next post (:func:`invalidate`),
and changes made through others within ``[filtering]
matcher_cache_seconds``, when the queue is listed again. While
the store cannot be reached, the matcher is rebuilt for every post: slower,
but never stale.
"""

from concurrent import futures
import heapq
import threading
import time
from urllib import parse as urllib_parse
import weakref

from oslo_log import log as logging
from zaqar.storage import errors as storage_errors

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import Matcher
from zaqar_filtering.policy.subscription import OPTIONS as FILTER_OPTIONS
from zaqar_filtering.store.base import StoreUnavailable
from zaqar_filtering import zaqar_storage

LOG = logging.getLogger(__name__)

#: Without a shared version: how long after a change made through this
#: process its queue's matcher is not cached, in seconds.
SETTLING_SECONDS = 2.0
#: How long a change may stay in flight before it counts as landed, in
#: seconds: the process that made it stopped before it landed.
IN_FLIGHT_LIMIT_SECONDS = 30.0
#: With a shared version: seconds before an entry is listed again in the
#: background, at least (changes through the stages are logged).
LOGGED_LISTING_SECONDS = 300.0
#: Delivery plans an entry keeps (see :meth:`QueueMatcher.plan`).
PLANS_PER_QUEUE = 64

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


class QueueMatcher:
    """A queue's Matcher and the subscriptions it holds.

    Changed in place under :attr:`lock`; whoever matches or reads
    :attr:`subscriptions` holds it too.

    :ivar subscriptions: dict of subscription id -> the subscription as
        delivery reads it (see :func:`for_delivery`).
    :ivar schemes: dict of subscription id -> its subscriber's URI scheme.
    :ivar version: the queue's version last seen.
    :ivar applied: the ``started`` counter up to which every change is
        final here; later ones are in flight.
    :ivar refresh_at: when it is listed again in the background.
    """

    def __init__(self, limits, version, applied, refresh_at):
        self.matcher = Matcher(limits)
        self.subscriptions = {}
        self.schemes = {}
        self.version = version
        self.applied = applied
        self.refresh_at = refresh_at
        self.lock = threading.RLock()
        self._options = {}
        self._expires = {}
        self._expiring = []
        self._plans = {}

    def __len__(self):
        return len(self.subscriptions)

    def match(self, message):
        """Return the ids of the subscriptions that receive ``message``."""
        with self.lock:
            return self.matcher.match(message)

    def plan(self, key, make):
        """Return what ``make()`` returned for ``key`` since the last change.

        For work that depends only on which subscriptions a post reaches
        (see :mod:`zaqar_filtering.stages.notifier`), done once.
        """
        with self.lock:
            found = self._plans.get(key)
            if found is None:
                if len(self._plans) >= PLANS_PER_QUEUE:
                    self._plans.clear()
                found = self._plans[key] = make()
            return found

    def put(self, sub, now, project=None):
        """Add or replace a subscription listed or read from Zaqar.

        A subscription that did not change is left as it is (its delivery
        plans too).
        """
        sub_id = sub['id']
        options = sub.get('options')
        delivered = for_delivery(sub)
        expires = now + sub['ttl'] - sub['age']
        with self.lock:
            if (self._options.get(sub_id, self) == options
                    and self.subscriptions.get(sub_id) == delivered):
                if abs(self._expires[sub_id] - expires) > 1:
                    self._expire_at(sub_id, expires)
                return
            try:
                self.matcher.add(sub_id, options)
            except InvalidPolicy as exc:
                # Delivering would ignore the subscriber's filter.
                LOG.warning('Subscription %(id)s of queue %(queue)s '
                            '(project %(project)s) is not notified: '
                            'its policy is invalid: %(reason)s',
                            {'id': sub_id, 'queue': sub['source'],
                             'project': project, 'reason': exc})
                self.discard(sub_id)
                return
            self.subscriptions[sub_id] = delivered
            self._options[sub_id] = options
            self.schemes[sub_id] = urllib_parse.urlsplit(
                sub['subscriber']).scheme
            self._expire_at(sub_id, expires)
            self._plans.clear()

    def sync(self, subscriptions, now, project=None):
        """Make the entry hold exactly ``subscriptions`` (a full listing)."""
        listed = set()
        for sub in subscriptions:
            listed.add(sub['id'])
            self.put(sub, now, project)
        with self.lock:
            for sub_id in [i for i in self.subscriptions if i not in listed]:
                self.discard(sub_id)

    def _expire_at(self, sub_id, expires):
        self._expires[sub_id] = expires
        heapq.heappush(self._expiring, (expires, sub_id))

    def discard(self, sub_id):
        """Remove a subscription; unknown ids are ignored."""
        with self.lock:
            self.matcher.remove(sub_id)
            if self.subscriptions.pop(sub_id, None) is not None:
                self._plans.clear()
            self.schemes.pop(sub_id, None)
            self._options.pop(sub_id, None)
            self._expires.pop(sub_id, None)

    def expire(self, now):
        """Remove the subscriptions whose ttl ran out by ``now``."""
        if not self._expiring or self._expiring[0][0] > now:
            return
        with self.lock:
            while self._expiring and self._expiring[0][0] <= now:
                expires, sub_id = heapq.heappop(self._expiring)
                if self._expires.get(sub_id) == expires:
                    self.discard(sub_id)


class MatcherCache:
    """Per-queue matchers built from Zaqar's subscription controller.

    :param subscription_controller: Zaqar's storage controller.
    :param limits: the :class:`Limits` policies are checked against.
    :param max_age: seconds before an entry is listed again in the
        background, for a store without shared versions (see
        :data:`LOGGED_LISTING_SECONDS` for the others).
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
        """A queue changed through this process.

        Without a shared version, forget its matcher and rebuild it for
        the next posts; with one, the change log tells every process.
        """
        key = (project, queue)
        self._settling[key] = self._clock() + SETTLING_SECONDS
        entry = self._entries.get(key)
        if entry is not None and entry.version is None:
            self._entries.pop(key, None)

    def get(self, project, queue):
        """Return the :class:`QueueMatcher` of a queue, up to date."""
        key = (project, queue)
        now = self._clock()
        version = self._version(project, queue)
        if version is _UNAVAILABLE:
            return self._build(project, queue, now, None)
        entry = self._entries.get(key)
        if entry is not None and not self._catch_up(entry, key, version,
                                                    now):
            entry = None
        if entry is None:
            entry = self._build(project, queue, now, version)
            if self._cacheable(key, version, now):
                self._entries[key] = entry
            return entry
        entry.expire(now)
        if now >= entry.refresh_at:
            self._refresh_later(key, entry)
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

    def _catch_up(self, entry, key, version, now):
        """Apply the changes ``entry`` has not seen; False to rebuild it."""
        if version is None or (entry.version == version
                               and version.started <= entry.applied):
            return True
        project, queue = key
        try:
            changes = self._store.changes(project, queue, entry.applied)
        except StoreUnavailable as exc:
            LOG.warning('Cannot read the changes of queue %(queue)s '
                        '(project %(project)s): %(error)s',
                        {'queue': queue, 'project': project, 'error': exc})
            return False
        if changes is None or any(refs is None
                                  for _, refs in changes.entries):
            LOG.debug('Rebuilding the matcher of queue %(queue)s (project '
                      '%(project)s): its changes since %(since)d are not '
                      'all logged', {'queue': queue, 'project': project,
                                     'since': entry.applied})
            return False
        with entry.lock:
            for _, refs in changes.entries:
                for ref in refs:
                    self._read_again(entry, project, queue, ref['id'], now)
            entry.version = changes.version
            entry.applied = max(entry.applied,
                                self._landed(key, changes.version, now))
        return True

    def _read_again(self, entry, project, queue, sub_id, now):
        try:
            sub = self._subscriptions.get(queue, sub_id, project=project)
        except storage_errors.SubscriptionDoesNotExist:
            sub = None
        if sub is None:
            entry.discard(sub_id)
        else:
            entry.put(sub, now, project)

    def _landed(self, key, version, now):
        """Return up to where the queue's changes are final."""
        if version is None:
            return 0
        if version.started <= version.landed:
            self._in_flight.pop(key, None)
            return version.landed
        started, since = self._in_flight.get(key, (None, now))
        if started != version.started:
            self._in_flight[key] = (version.started, now)
            return version.landed
        if now - since < IN_FLIGHT_LIMIT_SECONDS:
            return version.landed
        LOG.warning('A change of queue %(queue)s (project %(project)s) '
                    'has not landed after %(limit)d s: it counts as landed. '
                    'Run "zaqar-filtering-manage sync --project %(project)s '
                    '--queue %(queue)s".',
                    {'project': key[0], 'queue': key[1],
                     'limit': IN_FLIGHT_LIMIT_SECONDS})
        return version.started

    def _cacheable(self, key, version, now):
        if version is not None:
            return True
        # No shared version: only this process's own changes are known.
        if now < self._settling.get(key, 0):
            return False
        self._settling.pop(key, None)
        return True

    def _refresh_later(self, key, entry):
        if key in self._refreshing:
            return
        self._refreshing.add(key)
        self._executor.submit(self._refresh, key, entry)

    def _refresh(self, key, entry):
        """List the queue again and bring ``entry`` in line with it.

        In place: what did not change keeps its delivery plans. Changes
        logged after the version read before listing are read again at the
        next post, whether or not the listing saw them.
        """
        project, queue = key
        try:
            version = self._version(project, queue)
            if version is _UNAVAILABLE:
                return
            now = self._clock()
            entry.sync(zaqar_storage.list_subscriptions(
                self._subscriptions, project, queue), now, project)
            with entry.lock:
                if version is not None:
                    entry.applied = min(entry.applied, version.landed)
                entry.refresh_at = now + self._listing_seconds(version)
        except Exception:
            LOG.exception('Could not list the subscriptions of queue '
                          '%(queue)s (project %(project)s) in the background',
                          {'project': project, 'queue': queue})
        finally:
            self._refreshing.discard(key)

    def _listing_seconds(self, version):
        if version is None:
            return self._max_age
        # Changes through the stages are logged: listing again only
        # catches those made around them.
        return max(self._max_age, LOGGED_LISTING_SECONDS)

    def _build(self, project, queue, now, version):
        entry = QueueMatcher(self._limits, version,
                             self._landed((project, queue), version, now),
                             now + self._listing_seconds(version))
        entry.sync(zaqar_storage.list_subscriptions(self._subscriptions,
                                                    project, queue),
                   now, project)
        LOG.debug('Built the matcher of queue %(queue)s (project '
                  '%(project)s): %(count)d subscriptions in %(ms).1f ms',
                  {'queue': queue, 'project': project, 'count': len(entry),
                   'ms': (self._clock() - now) * 1000})
        return entry
