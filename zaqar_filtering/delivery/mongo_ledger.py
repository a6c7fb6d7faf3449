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

A post costs two round trips, whatever its fan-out: one takes a batch
number, one inserts the batch (its shared parts once, its targets as a
list). A claim first spreads a chunk or two of the oldest batches into
per-delivery documents, then hands due ones out.

Collections:

- ``zaqar_filtering_counters``: ``{_id: 'batch', n}``, the last batch
  number; batches are spread in that order.
- ``zaqar_filtering_delivery_batches``: a document per batch (or per part
  of a very large one): project ``p``, queue ``q``, ``pub``, ``dl``, the
  lists of bodies ``b``, headers ``h`` and policies ``o`` (JSON), the
  messages' ordering keys ``k`` (if they have any), the
  targets ``t`` (``[sid, url, strategy, bodies, headers, policy]``), how
  many there are ``n`` and have been spread ``spread``, ``todo`` while
  some are not, the pending deliveries ``live`` and the spreading lease
  ``lease``. It goes when it is spread and ``live`` drops to 0.
- ``zaqar_filtering_deliveries``: a document per pending delivery, with
  its subscriber (``p``, ``q``, ``s``), its batch ``bid`` and indexes in
  it (``bi``, ``mi``, ``hi``, ``oi``: the body stays in the batch), its
  due time ``due`` (a claim moves it to the lease's end), its lease token
  ``tok``, ``parked``, its ordering key ``ok`` (if it has one), and ``c``
  once its chunk is committed. Ids are
  ``batch << 24 | target << 8 | message``: they grow in publication order
  and are the same whoever spreads the chunk, so a chunk spread again
  (its spreader died) never duplicates a delivery.
- ``zaqar_filtering_delivery_subscribers``: a document per subscriber,
  ``_id: {p, q, s}``, with its URL, counts, last error and the id ``b``
  that blocks it (``exponential_decay``; never one with an ordering key).
- ``zaqar_filtering_delivery_gone``: deleted subscriptions, whose targets
  in batches not yet spread are skipped (for :data:`FORGOTTEN_SECONDS`).

MongoDB has no multi-document scripts: each step changes one document
atomically, and a claim takes a delivery only if it is still unleased and
due. A step that parks a delivery checks afterwards that what it waits for
still holds, and unparks it otherwise, so that no delivery stays parked
because of a step that ran concurrently.

A delivery with an ordering key is handed out only while it is the oldest
pending one of its subscriber and key, and only once its chunk is
committed (the documents of a chunk may become visible in any order); a
claim that meets a later one parks it, and the finish of the one before
unparks it. That order replaces the strategies' rules, which apply among
a subscriber's deliveries without a key only: a failing key holds up
neither other keys nor those. A lease that ends hands the same delivery
out again: a process that stalled past its lease may still post it after
the next one of its key (as for claims of an ordered queue, see the
README).

A chunk is spread under a lease on its batch: its deliveries are inserted
(duplicates ignored), counted, and the batch's ``spread`` and ``live``
move on only if no one committed the chunk meanwhile. A delivery finished
before its chunk is committed is kept as a tombstone (``parked: None``,
no subscriber), so that spreading the chunk again does not bring it back;
tombstones go when the chunk is committed or the batch goes.
"""

import datetime
import functools
import json
import time
import uuid

from pymongo import errors as mongo_errors
from pymongo import ReturnDocument

from zaqar_filtering.delivery import ledger as base
from zaqar_filtering.policy import retry
from zaqar_filtering.store.base import StoreUnavailable

COUNTERS = 'zaqar_filtering_counters'
BATCHES = 'zaqar_filtering_delivery_batches'
DELIVERIES = 'zaqar_filtering_deliveries'
SUBSCRIBERS = 'zaqar_filtering_delivery_subscribers'
GONE = 'zaqar_filtering_delivery_gone'
#: Due deliveries a claim looks at for each one it may hand out.
SCAN_FACTOR = 4
#: Deliveries a claim spreads at most (at least one target's), and the
#: lease of a chunk being spread.
SPREAD_PER_CLAIM = 1000
SPREAD_LEASE = 30.0
#: Bits of a delivery id for a message of a target and a target of a
#: batch document; larger posts are split into several documents.
MESSAGE_BITS = 8
TARGET_BITS = 16
#: Targets and (about) bytes a batch document holds at most, well under
#: MongoDB's 16 MB.
BATCH_TARGETS = 10000
BATCH_BYTES = 8 * 1024 * 1024
#: How long a deleted subscription is remembered: longer than any batch
#: waits to be spread.
FORGOTTEN_SECONDS = 7 * 86400
STORE = 'delivery ledger (mongodb)'
DUPLICATE_KEY = 11000

_CLAIM_FIELDS = {'p': 1, 'q': 1, 's': 1, 'st': 1, 'ok': 1, 'c': 1}
#: The fields that name a subscriber, and a subscriber's ordering key.
SUBSCRIBER = ('p', 'q', 's')
SUBSCRIBER_KEY = SUBSCRIBER + ('ok',)
#: Selects deliveries without an ordering key (missing ``ok``).
UNKEYED = {'ok': None}
#: What a finished or forgotten delivery still pending spreading becomes.
_TOMBSTONE = {'$set': {'parked': None, 'tok': ''},
              '$unset': {'p': '', 'q': '', 's': ''}}

assert BATCH_TARGETS < 2 ** TARGET_BITS


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


def _gone_id(sub):
    return '%s/%s/%s' % (sub['q'], sub['s'], sub['p'])


def _delivery_id(bid, target, message):
    return ((bid << TARGET_BITS | target) << MESSAGE_BITS) | message


def _insert_ignoring_duplicates(collection, docs):
    """Insert ``docs``, leaving those already there as they are."""
    if not docs:
        return
    try:
        collection.insert_many(docs, ordered=False)
    except mongo_errors.BulkWriteError as exc:
        if any(e.get('code') != DUPLICATE_KEY
               for e in exc.details.get('writeErrors', ())):
            raise
        if exc.details.get('writeConcernErrors'):
            raise


def _pieces(batch):
    """Split a batch into documents MongoDB and delivery ids can hold.

    Each piece keeps at most 2**MESSAGE_BITS messages of each target
    (later messages go to later pieces) and at most BATCH_TARGETS targets
    and about BATCH_BYTES of parts, which it lists again, renumbered.
    """
    window = 2 ** MESSAGE_BITS
    most = max(len(bodies) for bodies in batch.bodies)
    pieces = []
    for start in range(0, max(most, 1), window):
        piece = None
        for t in batch.targets:
            bodies = batch.bodies[t.bodies][start:start + window]
            if not bodies:
                continue
            headers = json.dumps(batch.headers[t.headers])
            policy = json.dumps(batch.policies[t.policy] or {})
            size = len(t.subscription_id) + len(t.subscriber) + 64
            if piece is not None:
                size += sum(len(b) + 8 for b in bodies
                            if t.bodies not in piece['bm'])
                size += 0 if t.headers in piece['hm'] else len(headers)
                size += 0 if t.policy in piece['om'] else len(policy)
            if (piece is None or len(piece['t']) >= BATCH_TARGETS
                    or piece['size'] + size > BATCH_BYTES):
                piece = {'t': [], 'b': [], 'h': [], 'o': [], 'bm': {},
                         'hm': {}, 'om': {}, 'size': 0, 'start': start}
                pieces.append(piece)
                size = (len(t.subscription_id) + len(t.subscriber) + 64
                        + sum(len(b) + 8 for b in bodies)
                        + len(headers) + len(policy))
            piece['size'] += size
            if t.bodies not in piece['bm']:
                piece['bm'][t.bodies] = len(piece['b'])
                piece['b'].append(list(bodies))
            if t.headers not in piece['hm']:
                piece['hm'][t.headers] = len(piece['h'])
                piece['h'].append(headers)
            if t.policy not in piece['om']:
                piece['om'][t.policy] = len(piece['o'])
                piece['o'].append(policy)
            piece['t'].append([t.subscription_id, t.subscriber, t.strategy,
                               piece['bm'][t.bodies], piece['hm'][t.headers],
                               piece['om'][t.policy]])
    return [{'p': batch.project or '', 'q': batch.queue,
             'pub': float(batch.published), 'dl': float(batch.deadline),
             'b': piece['b'], 'm': [len(b) for b in piece['b']],
             'h': piece['h'], 'o': piece['o'], 't': piece['t'],
             'k': (list(batch.keys[piece['start']:piece['start'] + window])
                   if any(batch.keys) else None),
             'n': len(piece['t']), 'spread': 0, 'todo': True, 'live': 0,
             'lease': 0.0}
            for piece in pieces]


class MongoLedger(base.Ledger):
    """The delivery ledger in a MongoDB database.

    :param database: a pymongo ``Database``.
    :param store: the store's name, for error messages.
    """

    def __init__(self, database, store=STORE):
        self._counters = database[COUNTERS]
        self._batches = database[BATCHES]
        self._deliveries = database[DELIVERIES]
        self._subscribers = database[SUBSCRIBERS]
        self._gone = database[GONE]
        self._store = store
        self._indexed = False

    def _ensure_indexes(self):
        if self._indexed:
            return
        self._deliveries.create_index([('parked', 1), ('due', 1)])
        self._deliveries.create_index([('p', 1), ('q', 1), ('s', 1),
                                       ('_id', 1)])
        self._deliveries.create_index([('p', 1), ('q', 1), ('s', 1),
                                       ('ok', 1), ('_id', 1)])
        self._deliveries.create_index([('bid', 1)])
        self._batches.create_index([('todo', 1), ('_id', 1)])
        self._gone.create_index([('at', 1)],
                                expireAfterSeconds=FORGOTTEN_SECONDS)
        self._indexed = True

    def _unpark_head(self, selector):
        """Unpark the oldest pending delivery of a subscriber's key.

        :param selector: the subscriber's fields, and ``ok`` (a key, or
            None for the oldest without one).
        """
        head = self._deliveries.find_one(
            selector, {'parked': 1}, sort=[('_id', 1)])
        if head is not None and head.get('parked'):
            self._deliveries.update_one({'_id': head['_id'], 'parked': True},
                                        {'$set': {'parked': False}})

    def _unpark_all(self, sub):
        self._deliveries.update_many(dict(sub, parked=True, **UNKEYED),
                                     {'$set': {'parked': False}})

    def _blocker(self, sub):
        doc = self._subscribers.find_one({'_id': _sub_id(sub)}, {'b': 1})
        return (doc or {}).get('b')

    def _recheck(self, sub, strategy):
        """Unpark what a concurrent step may have left parked for nothing."""
        if strategy == retry.BACKOFF:
            self._unpark_head(dict(sub, **UNKEYED))
        elif strategy == retry.EXPONENTIAL_DECAY:
            if self._blocker(sub) is None:
                self._unpark_all(sub)

    def _release(self, bid, count):
        """Count ``count`` deliveries of a batch fewer as pending.

        The batch goes (with its tombstones) once it is spread and none is.
        """
        doc = self._batches.find_one_and_update(
            {'_id': bid}, {'$inc': {'live': -count}},
            projection={'live': 1, 'todo': 1},
            return_document=ReturnDocument.AFTER)
        if doc is not None:
            self._drop_if_done(doc)

    def _drop_if_done(self, doc):
        if doc['live'] > 0 or doc['todo']:
            return
        gone = self._batches.delete_one(
            {'_id': doc['_id'], 'live': {'$lte': 0}, 'todo': False})
        if gone.deleted_count:
            self._deliveries.delete_many({'bid': doc['_id'],
                                          'parked': None})

    @_guarded
    def enqueue(self, batch):
        if not batch.targets or not batch.size:
            return
        pieces = _pieces(batch)
        last = self._counters.find_one_and_update(
            {'_id': 'batch'}, {'$inc': {'n': len(pieces)}}, upsert=True,
            return_document=ReturnDocument.AFTER)['n']
        for number, piece in enumerate(pieces):
            piece['_id'] = last - len(pieces) + number + 1
        self._batches.insert_many(pieces)

    def _spread(self, now):
        """Spread up to SPREAD_PER_CLAIM deliveries of the oldest batches."""
        budget = SPREAD_PER_CLAIM
        while budget > 0:
            head = self._batches.find_one(
                {'todo': True}, {'lease': 1, 'spread': 1, 'n': 1, 'm': 1},
                sort=[('todo', 1), ('_id', 1)])
            if head is None or head['lease'] >= now:
                # Nothing to spread, or another process spreads the
                # oldest batch: later ones wait for it, to keep order.
                return
            leased = self._batches.update_one(
                {'_id': head['_id'], 'spread': head['spread'],
                 'lease': head['lease']},
                {'$set': {'lease': now + SPREAD_LEASE}})
            if not leased.modified_count:
                return
            per_target = max(head['m']) or 1
            count = max(1, budget // per_target)
            budget -= self._spread_chunk(head, count) or per_target

    def _spread_chunk(self, head, count):
        """Spread ``count`` targets of a leased batch; return deliveries."""
        bid, start = head['_id'], head['spread']
        batch = self._batches.find_one(
            {'_id': bid}, {'t': {'$slice': [start, count]}, 'p': 1, 'q': 1,
                           'pub': 1, 'dl': 1, 'm': 1, 'k': 1})
        targets = batch['t']
        project, queue, pub = batch['p'], batch['q'], batch['pub']
        keys = batch.get('k') or ()
        sids = [t[0] for t in targets]
        subs = [_sub(project, queue, sid) for sid in sids]
        gone = {doc['_id'] for doc in self._gone.find(
            {'_id': {'$in': [_gone_id(sub) for sub in subs]},
             'until': {'$gt': time.time()}}, {'_id': 1})}
        backoff = [t[0] for t in targets if t[2] == retry.BACKOFF]
        behind = set(self._deliveries.distinct(
            's', dict({'p': project, 'q': queue, 's': {'$in': backoff},
                       'bid': {'$ne': bid}}, **UNKEYED))) if backoff else set()
        decay = [sub for sub, t in zip(subs, targets)
                 if t[2] == retry.EXPONENTIAL_DECAY]
        blocked = {doc['_id']['s'] for doc in self._subscribers.find(
            {'_id': {'$in': decay}, 'b': {'$ne': None}},
            {'_id': 1})} if decay else set()
        docs = []
        known = []
        recheck = []
        for index, (t, sub) in enumerate(zip(targets, subs)):
            sid, url, strategy, bodies = t[0], t[1], t[2], t[3]
            messages = batch['m'][bodies]
            if not messages or _gone_id(sub) in gone:
                continue
            known.append({'_id': sub, 'url': url})
            waits = ((strategy == retry.BACKOFF and sid in behind)
                     or (strategy == retry.EXPONENTIAL_DECAY
                         and sid in blocked))
            parked = False
            for message in range(messages):
                docs.append(dict(
                    sub, _id=_delivery_id(bid, start + index, message),
                    url=url, st=strategy, bid=bid, bi=bodies, mi=message,
                    hi=t[4], oi=t[5], pub=pub, dl=batch['dl'], a=0,
                    tok='', due=pub, parked=False, c=False))
                if message < len(keys) and keys[message] is not None:
                    # Its key's order alone decides: claims park it if an
                    # earlier one of its key waits.
                    docs[-1]['ok'] = keys[message]
                    continue
                docs[-1]['parked'] = waits
                parked = parked or waits
                if strategy == retry.BACKOFF:
                    waits = True
            if parked:
                recheck.append((sub, strategy))
        _insert_ignoring_duplicates(self._subscribers, known)
        _insert_ignoring_duplicates(self._deliveries, docs)
        low = _delivery_id(bid, start, 0)
        high = _delivery_id(bid, start + len(targets), 0)
        in_chunk = {'_id': {'$gte': low, '$lt': high}}
        # Each delivery of the chunk there counts, those already finished
        # (tombstones) too: their finish counted them off.
        live = self._deliveries.count_documents(in_chunk)
        spread = start + len(targets)
        committed = self._batches.find_one_and_update(
            {'_id': bid, 'spread': start},
            {'$set': {'spread': spread, 'todo': spread < head['n'],
                      'lease': 0.0},
             '$inc': {'live': live}},
            projection={'live': 1, 'todo': 1},
            return_document=ReturnDocument.AFTER)
        if committed is None:
            # Someone else committed the chunk (this lease ran out).
            return len(docs)
        self._deliveries.update_many(dict(in_chunk, c=False),
                                     {'$set': {'c': True}})
        self._deliveries.delete_many(dict(in_chunk, parked=None))
        for sub, strategy in recheck:
            self._recheck(sub, strategy)
        self._drop_if_done(committed)
        return len(docs)

    def _due_candidates(self, now, count):
        """Return up to ``count`` unparked due deliveries, oldest due first."""
        return list(self._deliveries.find(
            {'parked': False, 'due': {'$lte': now}}, _CLAIM_FIELDS,
            sort=[('due', 1), ('_id', 1)], limit=count))

    def _heads(self, docs, fields=SUBSCRIBER):
        """Return the oldest pending delivery id of each docs' subscriber.

        :param fields: SUBSCRIBER for the oldest without an ordering key,
            or SUBSCRIBER_KEY for the oldest of each subscriber's ordering
            key; the keys of the dict returned are tuples of these fields.
        """
        by_prefix = {}
        for doc in docs:
            by_prefix.setdefault(tuple(doc[f] for f in fields[:-1]),
                                 set()).add(doc[fields[-1]])
        if not by_prefix:
            return {}
        match = {'$or': [dict(zip(fields, prefix + ({'$in': sorted(last)},)))
                         for prefix, last in sorted(by_prefix.items())]}
        if fields == SUBSCRIBER:
            match.update(UNKEYED)
        return {tuple(row['_id'][f] for f in fields): row['h']
                for row in self._deliveries.aggregate([
                    {'$match': match},
                    {'$sort': dict([(f, 1) for f in fields] + [('_id', 1)])},
                    {'$group': {'_id': {f: '$' + f for f in fields},
                                'h': {'$first': '$_id'}}}])}

    def _blockers(self, docs):
        """Return the id that blocks each docs' subscriber, if one does."""
        subs = {(doc['p'], doc['q'], doc['s']) for doc in docs}
        if not subs:
            return {}
        return {(row['_id']['p'], row['_id']['q'], row['_id']['s']):
                row.get('b')
                for row in self._subscribers.find(
                    {'_id': {'$in': [{'p': p, 'q': q, 's': s}
                                     for p, q, s in sorted(subs)]}},
                    {'b': 1})}

    @_guarded
    def claim(self, now, limit, lease_seconds):
        if limit < 1:
            return []
        self._spread(now)
        token = uuid.uuid4().hex
        candidates = self._due_candidates(now, limit * SCAN_FACTOR)
        unkeyed = [doc for doc in candidates if 'ok' not in doc]
        heads = self._heads([doc for doc in unkeyed
                             if doc['st'] == retry.BACKOFF])
        blockers = self._blockers([doc for doc in unkeyed
                                   if doc['st'] == retry.EXPONENTIAL_DECAY])
        key_heads = self._heads([doc for doc in candidates if 'ok' in doc],
                                SUBSCRIBER_KEY)
        chosen = []
        for doc in candidates:
            if len(chosen) >= limit:
                break
            key = (doc['p'], doc['q'], doc['s'])
            ok = True
            if 'ok' in doc:
                if not doc['c']:
                    continue    # its key's earlier ones may not all be in
                if key_heads.get(key + (doc['ok'],)) != doc['_id']:
                    self._park_behind_key(doc, now)
                    continue
            elif doc['st'] == retry.BACKOFF:
                ok = heads.get(key) == doc['_id']
            elif doc['st'] == retry.EXPONENTIAL_DECAY:
                ok = blockers.get(key) in (None, doc['_id'])
            if ok:
                chosen.append(doc['_id'])
                continue
            parked = self._deliveries.update_one(
                {'_id': doc['_id'], 'parked': False, 'due': {'$lte': now}},
                {'$set': {'parked': True}})
            if parked.modified_count:
                self._recheck(_sub_id(doc), doc['st'])
        if not chosen:
            return []
        # Each only if still unleased, unparked and due: a concurrent
        # claim moved ``due`` to its lease's end.
        self._deliveries.update_many(
            {'_id': {'$in': chosen}, 'parked': False, 'due': {'$lte': now}},
            {'$set': {'due': now + lease_seconds, 'tok': token}})
        claimed = {doc['_id']: doc for doc in self._deliveries.find(
            {'_id': {'$in': chosen}, 'tok': token})}
        if not claimed:
            return []
        # One query for the shared parts of the claimed ones' batches.
        batches = {doc['_id']: doc for doc in self._batches.find(
            {'_id': {'$in': sorted({d['bid'] for d in claimed.values()})}},
            {'b': 1, 'h': 1, 'o': 1})}
        orphans = [i for i, doc in claimed.items()
                   if doc['bid'] not in batches]
        if orphans:
            # Re-created by a spreader that stalled past its lease after
            # the batch went: already delivered.
            self._deliveries.delete_many({'_id': {'$in': orphans},
                                          'tok': token})
        return [_delivery(claimed[i], batches[claimed[i]['bid']])
                for i in chosen if i in claimed and i not in orphans]

    def _park_behind_key(self, doc, now):
        """Park a delivery that an earlier one of its key is ahead of."""
        parked = self._deliveries.update_one(
            {'_id': doc['_id'], 'parked': False, 'due': {'$lte': now}},
            {'$set': {'parked': True}})
        if parked.modified_count:
            # The one ahead may have finished meanwhile.
            self._unpark_head(dict(_sub_id(doc), ok=doc['ok']))

    @_guarded
    def retry(self, delivery, due, error, now):
        if not delivery.token:
            return False
        doc = self._deliveries.find_one_and_update(
            {'_id': delivery.id, 'tok': delivery.token},
            {'$inc': {'a': 1},
             '$set': {'tok': '', 'due': due, 'parked': False}},
            projection={'p': 1, 'q': 1, 's': 1, 'a': 1, 'st': 1, 'url': 1,
                        'ok': 1},
            return_document=ReturnDocument.AFTER)
        if doc is None:
            return False
        sub_id = _sub_id(doc)
        update = {'$set': {'err': error, 'err_at': now, 'url': doc['url']}}
        if doc['a'] == 1:
            update['$inc'] = {'retrying': 1}
        self._subscribers.update_one({'_id': sub_id}, update, upsert=True)
        if (doc['st'] == retry.EXPONENTIAL_DECAY and doc['a'] >= 2
                and 'ok' not in doc):
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
        fields = {'p': 1, 'q': 1, 's': 1, 'a': 1, 'bid': 1, 'url': 1,
                  'ok': 1}
        doc = self._deliveries.find_one_and_delete(
            {'_id': delivery.id, 'tok': delivery.token, 'c': True},
            projection=fields)
        if doc is None:
            # Its chunk may be spread again: keep a tombstone.
            doc = self._deliveries.find_one_and_update(
                {'_id': delivery.id, 'tok': delivery.token,
                 'parked': {'$ne': None}},
                _TOMBSTONE, projection=fields)
        if doc is None:
            return False
        sub_id = _sub_id(doc)
        inc = {outcome: 1}
        if doc['a'] > 0:
            inc['retrying'] = -1
        update = {'$inc': inc, '$set': {'url': doc['url']}}
        if error:
            update['$set'].update(err=error, err_at=now)
        stats = self._subscribers.find_one_and_update(
            {'_id': sub_id}, update, projection={'b': 1}, upsert=True,
            return_document=ReturnDocument.AFTER)
        self._release(doc['bid'], 1)
        if 'ok' in doc:
            self._unpark_head(dict(sub_id, ok=doc['ok']))
            return True
        blocker = stats.get('b')
        if blocker == delivery.id:
            self._subscribers.update_one({'_id': sub_id, 'b': delivery.id},
                                         {'$unset': {'b': ''}})
            self._unpark_all(sub_id)
        elif blocker is None:
            self._unpark_head(dict(sub_id, **UNKEYED))
        return True

    @_guarded
    def next_due(self):
        head = self._batches.find_one({'todo': True}, {'lease': 1},
                                      sort=[('todo', 1), ('_id', 1)])
        if head is not None and not head['lease']:
            return 0.0
        first = self._deliveries.find_one({'parked': False}, {'due': 1},
                                          sort=[('due', 1)])
        if head is None:
            return first['due'] if first else None
        # Another process spreads it (or died doing so): a claim can spread
        # it again when that lease ends, not before.
        return min(head['lease'], first['due']) if first else head['lease']

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
            if not pending and not set(counts) - {'url'}:
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
        # First, so that batches spread from now on skip it.
        self._gone.update_one(
            {'_id': _gone_id(sub)},
            {'$set': dict(sub, until=time.time() + FORGOTTEN_SECONDS,
                          at=datetime.datetime.now(datetime.timezone.utc))},
            upsert=True)
        by_batch = {}
        for doc in self._deliveries.find(sub, {'bid': 1}):
            by_batch.setdefault(doc['bid'], []).append(doc['_id'])
        dropped = 0
        for bid, ids in sorted(by_batch.items()):
            # Tombstones, counted off once each (a finish may race).
            gone = self._deliveries.update_many(
                dict(sub, _id={'$in': ids}), _TOMBSTONE).modified_count
            self._deliveries.delete_many(
                {'_id': {'$in': ids}, 'c': True, 'parked': None})
            if gone:
                dropped += gone
                self._release(bid, gone)
        self._subscribers.delete_one({'_id': sub})
        return dropped


def _delivery(doc, batch):
    return base.Delivery(
        id=doc['_id'], project=doc['p'] or None, queue=doc['q'],
        subscription_id=doc['s'], subscriber=doc['url'],
        headers=json.loads(batch['h'][doc['hi']]), strategy=doc['st'],
        policy=json.loads(batch['o'][doc['oi']]),
        published=float(doc['pub']), deadline=float(doc['dl']),
        body=batch['b'][doc['bi']][doc['mi']], attempts=doc['a'],
        token=doc['tok'])
