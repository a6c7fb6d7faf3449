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

"""The delivery ledger in MongoDB (Zaqar's or the policy store's database).

Collections:

- ``zaqar_filtering_counters``: ``{_id: 'delivery', n}``, the last
  delivery id; ids grow in publication order.
- ``zaqar_filtering_deliveries``: a document per pending delivery, with
  its subscriber (``p``, ``q``, ``s``), its due time ``due`` (a claim
  moves it to the lease's end), its lease token ``tok`` and ``parked``.
- ``zaqar_filtering_delivery_subscribers``: a document per subscriber,
  ``_id: {p, q, s}``, with its URL, counts, last error and the id ``b``
  that blocks it (``exponential_decay``).

MongoDB has no multi-document scripts: each step changes one document
atomically, and a claim takes a delivery only if it is still unleased and
due. A step that parks a delivery checks afterwards that what it waits for
still holds, and unparks it otherwise, so that no delivery stays parked
because of a step that ran concurrently.
"""

import functools
import json
import uuid

from pymongo import errors as mongo_errors
from pymongo import ReturnDocument

from zaqar_filtering.delivery import ledger as base
from zaqar_filtering.policy import retry
from zaqar_filtering.store.base import StoreUnavailable

COUNTERS = 'zaqar_filtering_counters'
DELIVERIES = 'zaqar_filtering_deliveries'
SUBSCRIBERS = 'zaqar_filtering_delivery_subscribers'
#: Due deliveries a claim looks at for each one it may hand out.
SCAN_FACTOR = 4
STORE = 'delivery ledger (mongodb)'

_CLAIM_FIELDS = {'p': 1, 'q': 1, 's': 1, 'st': 1}


def _guarded(method):
    """Turn pymongo errors into StoreUnavailable; create indexes first."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            self._ensure_indexes()
            return method(self, *args, **kwargs)
        except mongo_errors.PyMongoError as exc:
            raise StoreUnavailable(self._store, exc) from exc
    return wrapper


def _sub(project, queue, subscription_id):
    """Return the fields that name a subscriber in a delivery."""
    return {'p': project or '', 'q': queue, 's': subscription_id}


def _sub_id(doc):
    """Return a subscriber document's ``_id`` for a delivery document."""
    return {'p': doc['p'], 'q': doc['q'], 's': doc['s']}


class MongoLedger(base.Ledger):
    """The delivery ledger in a MongoDB database.

    :param database: a pymongo ``Database``.
    :param store: the store's name, for error messages.
    """

    def __init__(self, database, store=STORE):
        self._counters = database[COUNTERS]
        self._deliveries = database[DELIVERIES]
        self._subscribers = database[SUBSCRIBERS]
        self._store = store
        self._indexed = False

    def _ensure_indexes(self):
        if self._indexed:
            return
        self._deliveries.create_index([('parked', 1), ('due', 1)])
        self._deliveries.create_index([('p', 1), ('q', 1), ('s', 1),
                                       ('_id', 1)])
        self._indexed = True

    def _head(self, sub):
        """Return the subscriber's oldest pending delivery, or None."""
        return self._deliveries.find_one(
            sub, {'parked': 1}, sort=[('_id', 1)])

    def _unpark_head(self, sub):
        head = self._head(sub)
        if head is not None and head.get('parked'):
            self._deliveries.update_one({'_id': head['_id'], 'parked': True},
                                        {'$set': {'parked': False}})

    def _unpark_all(self, sub):
        self._deliveries.update_many(dict(sub, parked=True),
                                     {'$set': {'parked': False}})

    def _blocker(self, sub):
        doc = self._subscribers.find_one({'_id': _sub_id(sub)}, {'b': 1})
        return (doc or {}).get('b')

    def _recheck(self, sub, strategy):
        """Unpark what a concurrent step may have left parked for nothing."""
        if strategy == retry.BACKOFF:
            self._unpark_head(sub)
        elif strategy == retry.EXPONENTIAL_DECAY:
            if self._blocker(sub) is None:
                self._unpark_all(sub)

    @_guarded
    def enqueue(self, new):
        sub = _sub(new.project, new.queue, new.subscription_id)
        count = len(new.bodies)
        if not count:
            return
        self._subscribers.update_one({'_id': _sub_id(sub)},
                                     {'$set': {'url': new.subscriber}},
                                     upsert=True)
        last = self._counters.find_one_and_update(
            {'_id': 'delivery'}, {'$inc': {'n': count}}, upsert=True,
            return_document=ReturnDocument.AFTER)['n']
        waits = False
        if new.strategy == retry.BACKOFF:
            waits = self._head(sub) is not None
        elif new.strategy == retry.EXPONENTIAL_DECAY:
            waits = self._blocker(sub) is not None
        docs = []
        policy = json.dumps(new.policy or {})
        headers = json.dumps(new.headers)
        for index, body in enumerate(new.bodies):
            docs.append(dict(
                sub, _id=last - count + index + 1, url=new.subscriber,
                st=new.strategy, pol=policy, hdr=headers,
                pub=float(new.published), dl=float(new.deadline), body=body,
                a=0, tok='', due=float(new.published), parked=waits))
            if new.strategy == retry.BACKOFF:
                waits = True
        self._deliveries.insert_many(docs)
        if any(doc['parked'] for doc in docs):
            self._recheck(sub, new.strategy)

    def _due_candidates(self, now, count):
        """Return up to ``count`` unparked due deliveries, oldest due first."""
        return list(self._deliveries.find(
            {'parked': False, 'due': {'$lte': now}}, _CLAIM_FIELDS,
            sort=[('due', 1), ('_id', 1)], limit=count))

    @_guarded
    def claim(self, now, limit, lease_seconds):
        if limit < 1:
            return []
        token = uuid.uuid4().hex
        heads = {}
        blockers = {}
        out = []
        for doc in self._due_candidates(now, limit * SCAN_FACTOR):
            if len(out) >= limit:
                break
            sub = _sub_id(doc)
            key = (doc['p'], doc['q'], doc['s'])
            ok = True
            if doc['st'] == retry.BACKOFF:
                if key not in heads:
                    head = self._head(sub)
                    heads[key] = head['_id'] if head else None
                ok = heads[key] == doc['_id']
            elif doc['st'] == retry.EXPONENTIAL_DECAY:
                if key not in blockers:
                    blockers[key] = self._blocker(sub)
                ok = blockers[key] in (None, doc['_id'])
            # Only if still unleased, unparked and due: a concurrent claim
            # moved ``due`` to its lease's end.
            still_due = {'_id': doc['_id'], 'parked': False,
                         'due': {'$lte': now}}
            if ok:
                claimed = self._deliveries.find_one_and_update(
                    still_due,
                    {'$set': {'due': now + lease_seconds, 'tok': token}},
                    return_document=ReturnDocument.AFTER)
                if claimed is not None:
                    out.append(_delivery(claimed))
            else:
                parked = self._deliveries.update_one(
                    still_due, {'$set': {'parked': True}})
                if parked.modified_count:
                    self._recheck(sub, doc['st'])
        return out

    @_guarded
    def retry(self, delivery, due, error, now):
        if not delivery.token:
            return False
        doc = self._deliveries.find_one_and_update(
            {'_id': delivery.id, 'tok': delivery.token},
            {'$inc': {'a': 1},
             '$set': {'tok': '', 'due': due, 'parked': False}},
            projection={'p': 1, 'q': 1, 's': 1, 'a': 1, 'st': 1},
            return_document=ReturnDocument.AFTER)
        if doc is None:
            return False
        sub_id = _sub_id(doc)
        update = {'$set': {'err': error, 'err_at': now}}
        if doc['a'] == 1:
            update['$inc'] = {'retrying': 1}
        self._subscribers.update_one({'_id': sub_id}, update, upsert=True)
        if doc['st'] == retry.EXPONENTIAL_DECAY and doc['a'] >= 2:
            self._subscribers.update_one({'_id': sub_id, 'b': None},
                                         {'$set': {'b': delivery.id}})
        return True

    @_guarded
    def finish(self, delivery, outcome, error, now):
        if outcome not in base.OUTCOMES:
            raise ValueError('outcome must be one of %s, not %r'
                             % (', '.join(base.OUTCOMES), outcome))
        if not delivery.token:
            return False
        doc = self._deliveries.find_one_and_delete(
            {'_id': delivery.id, 'tok': delivery.token},
            projection={'p': 1, 'q': 1, 's': 1, 'a': 1})
        if doc is None:
            return False
        sub_id = _sub_id(doc)
        inc = {outcome: 1}
        if doc['a'] > 0:
            inc['retrying'] = -1
        update = {'$inc': inc}
        if error:
            update['$set'] = {'err': error, 'err_at': now}
        stats = self._subscribers.find_one_and_update(
            {'_id': sub_id}, update, projection={'b': 1}, upsert=True,
            return_document=ReturnDocument.AFTER)
        blocker = stats.get('b')
        if blocker == delivery.id:
            self._subscribers.update_one({'_id': sub_id, 'b': delivery.id},
                                         {'$unset': {'b': ''}})
            self._unpark_all(sub_id)
        elif blocker is None:
            self._unpark_head(sub_id)
        return True

    @_guarded
    def next_due(self):
        first = self._deliveries.find_one({'parked': False}, {'due': 1},
                                          sort=[('due', 1)])
        return first['due'] if first else None

    @_guarded
    def stats(self, project=None, queue=None, subscription_id=None):
        if queue is not None and subscription_id is not None:
            sub_id = _sub(project, queue, subscription_id)
            docs = [self._subscribers.find_one({'_id': sub_id})
                    or {'_id': sub_id}]
        else:
            selector = {}
            if project is not None:
                selector['_id.p'] = project or ''
            if queue is not None:
                selector['_id.q'] = queue
            docs = self._subscribers.find(
                selector, sort=[('_id.q', 1), ('_id.s', 1), ('_id.p', 1)])
        found = []
        for doc in docs:
            sub_id = _sub_id(doc['_id'])
            pending = self._deliveries.count_documents(sub_id)
            counts = {k: v for k, v in doc.items() if k not in ('_id', 'b')}
            if not counts and not pending:
                continue
            found.append(base.SubscriberStats(
                project=sub_id['p'] or None, queue=sub_id['q'],
                subscription_id=sub_id['s'], subscriber=counts.get('url'),
                pending=pending, retrying=int(counts.get('retrying', 0)),
                delivered=int(counts.get(base.DELIVERED, 0)),
                dropped=int(counts.get(base.DROPPED, 0)),
                expired=int(counts.get(base.EXPIRED, 0)),
                last_error=counts.get('err'),
                last_error_at=(float(counts['err_at'])
                               if counts.get('err_at') is not None
                               else None)))
        return found

    @_guarded
    def forget(self, project, queue, subscription_id):
        sub = _sub(project, queue, subscription_id)
        dropped = self._deliveries.delete_many(sub).deleted_count
        self._subscribers.delete_one({'_id': sub})
        return dropped


def _delivery(doc):
    return base.Delivery(
        id=doc['_id'], project=doc['p'] or None, queue=doc['q'],
        subscription_id=doc['s'], subscriber=doc['url'],
        headers=json.loads(doc['hdr']), strategy=doc['st'],
        policy=json.loads(doc['pol']), published=float(doc['pub']),
        deadline=float(doc['dl']), body=doc['body'], attempts=doc['a'],
        token=doc['tok'])
