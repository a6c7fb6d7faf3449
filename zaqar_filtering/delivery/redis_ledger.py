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

"""The delivery ledger in redis (Zaqar's message store), with Lua scripts.

A post costs one transaction, whatever its fan-out: the batch's shared
parts in a hash, its targets in chunks (encoded once for all the posts
that reach the same subscriptions), its id at the end of the inbox. A
claim first spreads a few chunks of the oldest batches into deliveries,
then hands due ones out.

Keys, under ``zaqar_filtering.delivery.``:

- ``inbox``: ids of batches still to be spread, oldest first.
- ``batch.<bid>``: a batch's hash: project ``p``, queue ``q``, ``pub``,
  ``dl``, bodies ``b<i>.<j>``, headers ``h<i>``, policies ``o<i>``, the
  messages' ordering keys ``ks`` (JSON, if they have any); ``n``,
  its pending deliveries, and ``x`` once it is spread (it goes when both
  say it is done). ``batch.<bid>.t``: its chunks of targets to spread.
- ``seq``: the last delivery id; ids grow in publication order.
- ``e.<id>``: a hash per pending delivery (its body stays in the batch).
- ``due``: sorted set of ids by due time (a claim moves it to the lease's
  end).
- ``q.<sub>``: sorted set of a subscriber's pending ids without an
  ordering key, by id: the strategies' order rules apply among them.
- ``p.<sub>``: sorted set of a subscriber's parked ids, by due time.
- ``b.<sub>``: the id that blocks a blocking subscriber (one without an
  ordering key).
- ``qk.<sub>``: sorted set of a subscriber's pending ids with an ordering
  key, by id (for counts).
- ``o.<sub>\\n<key>``: sorted set of a subscriber's pending ids of one
  ordering key, by id. Only the first is handed out, whatever the
  strategy: per-key order replaces the subscriber's order rules, and a
  failing key holds up neither other keys nor ids without a key. The
  others wait outside ``due``, their due time in their hash's field
  ``kp``, until the one before them goes (a claim that meets one in
  ``due`` moves it there).
- ``s.<sub>``: a hash of the subscriber's counts and last error.
- ``subs``: the set of subscribers with pending deliveries or counts.
- ``gone.<sub>``: a deleted subscription, whose targets in batches not
  yet spread are skipped (for :data:`FORGOTTEN_SECONDS`).

``<sub>`` is ``queue/subscription_id/project``: neither a queue name nor
a subscription id contains a slash.
"""

import json
import uuid

from zaqar_filtering.delivery import ledger as base
from zaqar_filtering.store.base import StoreUnavailable

PREFIX = 'zaqar_filtering.delivery.'
#: Due ids a claim looks at for each one it may hand out.
SCAN_FACTOR = 4
#: Deliveries per chunk of a batch (at least one target), and chunks a
#: claim spreads at most: they bound how long one script holds redis.
CHUNK_DELIVERIES = 250
CHUNKS_PER_CLAIM = 4
STORE = 'delivery ledger (redis)'
#: Seconds the ledger waits for an answer from redis.
SOCKET_TIMEOUT_SECONDS = 10.0
#: How long a deleted subscription is remembered: longer than any batch
#: waits to be spread.
FORGOTTEN_SECONDS = 7 * 86400

_COMMON = """
local P = ARGV[1]

-- Moves parked deliveries of subscriber k back to "due": all of them when
-- all is true, else only the subscriber's oldest pending one if parked.
local function unpark(k, all)
  local pkey = P .. 'p.' .. k
  if all then
    local parked = redis.call('ZRANGE', pkey, 0, -1, 'WITHSCORES')
    for i = 1, #parked, 2 do
      redis.call('ZADD', P .. 'due', parked[i + 1], parked[i])
    end
    redis.call('DEL', pkey)
  else
    local head = redis.call('ZRANGE', P .. 'q.' .. k, 0, 0)[1]
    if head then
      local score = redis.call('ZSCORE', pkey, head)
      if score then
        redis.call('ZREM', pkey, head)
        redis.call('ZADD', P .. 'due', score, head)
      end
    end
  end
end

-- One delivery of a batch fewer is pending; the batch goes with its last.
local function release(bid)
  local bkey = P .. 'batch.' .. bid
  local left = redis.call('HINCRBY', bkey, 'n', -1)
  if left <= 0 and redis.call('HEXISTS', bkey, 'x') == 1 then
    redis.call('DEL', bkey)
  end
end

-- The sorted set of subscriber k's pending ids of the ordering key okey
-- (which has no control character).
local function keyed(k, okey)
  return P .. 'o.' .. k .. '\\n' .. okey
end

-- Makes the oldest pending delivery of a key due if it waits for its turn.
local function unpark_key(k, okey)
  local head = redis.call('ZRANGE', keyed(k, okey), 0, 0)[1]
  if head then
    local ekey = P .. 'e.' .. head
    local due = redis.call('HGET', ekey, 'kp')
    if due then
      redis.call('HDEL', ekey, 'kp')
      redis.call('ZADD', P .. 'due', due, head)
    end
  end
end
"""

_SPREAD = """
-- Spreads up to ARGV[2] chunks of the oldest batches into deliveries.
local function spread(chunks)
  while chunks > 0 do
    local bid = redis.call('LINDEX', P .. 'inbox', 0)
    if not bid then
      return
    end
    local bkey = P .. 'batch.' .. bid
    local chunk = redis.call('LPOP', bkey .. '.t')
    if not chunk then
      redis.call('LPOP', P .. 'inbox')
      redis.call('HSET', bkey, 'x', 1)
      if tonumber(redis.call('HGET', bkey, 'n') or '0') <= 0 then
        redis.call('DEL', bkey)
      end
    else
      chunks = chunks - 1
      local b = redis.call('HMGET', bkey, 'p', 'q', 'pub', 'dl', 'm', 'ks')
      local project, queue, pub, dl = b[1], b[2], b[3], b[4]
      local counts = cjson.decode(b[5])
      local keys = b[6] and cjson.decode(b[6])
      local spread_now = 0
      -- Targets share a few headers and policies: read each once.
      local shared = {}
      local function field(name)
        local value = shared[name]
        if not value then
          value = redis.call('HGET', bkey, name)
          shared[name] = value
        end
        return value
      end
      for _, t in ipairs(cjson.decode(chunk)) do
        local sid, url, st = t[1], t[2], t[3]
        local k = queue .. '/' .. sid .. '/' .. project
        local qkey = P .. 'q.' .. k
        local count = counts[t[4] + 1]
        if redis.call('EXISTS', P .. 'gone.' .. k) == 1 then
          count = 0
        end
        local waits = false
        if st == 'backoff' then
          waits = redis.call('ZCARD', qkey) > 0
        elseif st == 'exponential_decay' then
          waits = redis.call('EXISTS', P .. 'b.' .. k) == 1
        end
        local hdr = field('h' .. t[5])
        local pol = field('o' .. t[6])
        local last = redis.call('INCRBY', P .. 'seq', count)
        if count > 0 then
          redis.call('SADD', P .. 'subs', k)
          redis.call('HSET', P .. 's.' .. k, 'url', url)
        end
        for i = 1, count do
          local id = last - count + i
          local ekey = P .. 'e.' .. id
          redis.call('HSET', ekey, 'k', k, 'url', url, 'st', st,
                     'pol', pol, 'hdr', hdr, 'pub', pub, 'dl', dl, 'a', 0,
                     'tok', '', 'bid', bid,
                     'body', 'b' .. t[4] .. '.' .. (i - 1))
          local okey = keys and keys[i]
          if type(okey) == 'string' then
            -- Its key's order alone decides when it goes.
            local oset = keyed(k, okey)
            local held = redis.call('ZCARD', oset) > 0
            redis.call('ZADD', oset, id, id)
            redis.call('ZADD', P .. 'qk.' .. k, id, id)
            redis.call('HSET', ekey, 'ok', okey)
            if held then
              redis.call('HSET', ekey, 'kp', pub)
            else
              redis.call('ZADD', P .. 'due', pub, id)
            end
          else
            redis.call('ZADD', qkey, id, id)
            if waits then
              redis.call('ZADD', P .. 'p.' .. k, pub, id)
            else
              redis.call('ZADD', P .. 'due', pub, id)
            end
            if st == 'backoff' then
              waits = true
            end
          end
        end
        spread_now = spread_now + count
      end
      redis.call('HINCRBY', bkey, 'n', spread_now)
    end
  end
end
"""

_CLAIM = _COMMON + _SPREAD + """
spread(tonumber(ARGV[2]))
local limit = tonumber(ARGV[4])
local ids = redis.call('ZRANGEBYSCORE', P .. 'due', '-inf', ARGV[3],
                       'LIMIT', 0, limit * tonumber(ARGV[7]))
local out = {}
for _, id in ipairs(ids) do
  if #out >= limit then
    break
  end
  local ekey = P .. 'e.' .. id
  local f = redis.call('HMGET', ekey, 'k', 'st', 'ok', 'url', 'pol', 'hdr',
                       'pub', 'dl', 'a', 'bid', 'body')
  local k, st, okey = f[1], f[2], f[3]
  if not k then
    redis.call('ZREM', P .. 'due', id)
  else
    local ok = true
    local held = false
    if okey then
      held = redis.call('ZRANGE', keyed(k, okey), 0, 0)[1] ~= id
    elseif st == 'backoff' then
      ok = redis.call('ZRANGE', P .. 'q.' .. k, 0, 0)[1] == id
    elseif st == 'exponential_decay' then
      local b = redis.call('GET', P .. 'b.' .. k)
      ok = (not b) or b == id
    end
    if held then
      -- An earlier delivery of its key is pending: it waits for its turn.
      redis.call('HSET', ekey, 'kp', redis.call('ZSCORE', P .. 'due', id))
      redis.call('ZREM', P .. 'due', id)
    elseif ok then
      redis.call('ZADD', P .. 'due', ARGV[5], id)
      redis.call('HSET', ekey, 'tok', ARGV[6])
      table.insert(out, {id, f[4], st, f[5], f[6], f[7], f[8], f[9],
                         redis.call('HGET', P .. 'batch.' .. f[10], f[11]),
                         k})
    else
      local score = redis.call('ZSCORE', P .. 'due', id)
      redis.call('ZREM', P .. 'due', id)
      redis.call('ZADD', P .. 'p.' .. k, score, id)
    end
  end
end
-- One string the client decodes at once (cjson writes {} for no rows).
if #out == 0 then
  return '[]'
end
return cjson.encode(out)
"""

_RECORD = _COMMON + """
-- Counts a failed attempt of delivery id, due again at due.
local function retry(id, tok, due, err, now)
  local ekey = P .. 'e.' .. id
  local f = redis.call('HMGET', ekey, 'k', 'tok', 'a', 'st', 'ok')
  if not f[1] or f[2] ~= tok then
    return 0
  end
  local k = f[1]
  local attempts = tonumber(f[3]) + 1
  redis.call('HSET', ekey, 'a', attempts, 'tok', '')
  redis.call('ZADD', P .. 'due', due, id)
  local skey = P .. 's.' .. k
  if attempts == 1 then
    redis.call('HINCRBY', skey, 'retrying', 1)
  end
  redis.call('HSET', skey, 'err', err, 'err_at', now)
  if f[4] == 'exponential_decay' and attempts >= 2 and not f[5] then
    redis.call('SET', P .. 'b.' .. k, id, 'NX')
  end
  return 1
end

-- Removes delivery id, counted under outcome.
local function finish(id, tok, outcome, err, now)
  local ekey = P .. 'e.' .. id
  local f = redis.call('HMGET', ekey, 'k', 'tok', 'a', 'bid', 'ok')
  if not f[1] or f[2] ~= tok then
    return 0
  end
  local k = f[1]
  redis.call('DEL', ekey)
  release(f[4])
  redis.call('ZREM', P .. 'due', id)
  local skey = P .. 's.' .. k
  redis.call('HINCRBY', skey, outcome, 1)
  if tonumber(f[3]) > 0 then
    redis.call('HINCRBY', skey, 'retrying', -1)
  end
  if err ~= '' then
    redis.call('HSET', skey, 'err', err, 'err_at', now)
  end
  if f[5] then
    redis.call('ZREM', P .. 'qk.' .. k, id)
    redis.call('ZREM', keyed(k, f[5]), id)
    unpark_key(k, f[5])
    return 1
  end
  redis.call('ZREM', P .. 'q.' .. k, id)
  local bkey = P .. 'b.' .. k
  local blocker = redis.call('GET', bkey)
  if blocker == id then
    redis.call('DEL', bkey)
    unpark(k, true)
  elseif not blocker then
    unpark(k, false)
  end
  return 1
end

-- ARGV[2]: the outcomes, [[id, token, event, due, error, now]].
-- Returns a '1' (recorded) or '0' (lease lost) per outcome.
local kept = {}
for _, o in ipairs(cjson.decode(ARGV[2])) do
  local done
  if o[3] == 'retried' then
    done = retry(o[1], o[2], o[4], o[5], o[6])
  else
    done = finish(o[1], o[2], o[3], o[5], o[6])
  end
  table.insert(kept, done)
end
return table.concat(kept)
"""

_FORGET = _COMMON + """
local k = ARGV[2]
local ids = redis.call('ZRANGE', P .. 'q.' .. k, 0, -1)
for _, id in ipairs(redis.call('ZRANGE', P .. 'qk.' .. k, 0, -1)) do
  table.insert(ids, id)
end
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', P .. 'e.' .. id, 'bid', 'ok')
  release(f[1])
  if f[2] then
    redis.call('DEL', keyed(k, f[2]))
  end
  redis.call('DEL', P .. 'e.' .. id)
  redis.call('ZREM', P .. 'due', id)
end
redis.call('DEL', P .. 'q.' .. k, P .. 'qk.' .. k, P .. 'p.' .. k,
           P .. 'b.' .. k, P .. 's.' .. k)
redis.call('SREM', P .. 'subs', k)
-- Targets of batches not spread yet are skipped when they are.
redis.call('SET', P .. 'gone.' .. k, 1, 'EX', ARGV[3])
return #ids
"""


def _own_client(client):
    """Return a client like ``client``, for scripts that must not rerun.

    Zaqar's client times out after 0.1 s and redis-py then sends the
    command again: a claim that took longer (spreading a large batch on a
    busy machine) would lease deliveries that nobody posts until the lease
    ends, and a post would be recorded twice. This one waits
    :data:`SOCKET_TIMEOUT_SECONDS` and sends again only what never left
    (a connection that failed before the command was written).
    """
    import redis
    from redis import backoff
    from redis import retry
    pool = client.connection_pool
    if type(pool) is not redis.ConnectionPool:
        return client       # sentinel or cluster: keep their own settings
    kwargs = dict(pool.connection_kwargs,
                  socket_timeout=SOCKET_TIMEOUT_SECONDS,
                  retry=retry.Retry(backoff.NoBackoff(), 1,
                                    supported_errors=(
                                        redis.exceptions.ConnectionError,)))
    return redis.Redis(connection_pool=redis.ConnectionPool(
        connection_class=pool.connection_class, **kwargs))


def subscriber_key(project, queue, subscription_id):
    """Return the ``<sub>`` part of the keys of one subscription."""
    return '%s/%s/%s' % (queue, subscription_id, project or '')


def _text(value):
    return value.decode('utf-8') if isinstance(value, bytes) else value


class RedisLedger(base.Ledger):
    """The delivery ledger in redis.

    :param client: a ``redis.Redis`` client (Zaqar's own).
    """

    def __init__(self, client):
        # redis-py comes with Zaqar's redis store, not with this package.
        import redis
        self._client = client = _own_client(client)
        self._errors = (redis.exceptions.ConnectionError,
                        redis.exceptions.TimeoutError)
        self._claim = client.register_script(_CLAIM)
        self._record = client.register_script(_RECORD)
        self._forget = client.register_script(_FORGET)

    def _call(self, function, *args, **kwargs):
        try:
            return function(*args, **kwargs)
        except self._errors as exc:
            raise StoreUnavailable(STORE, exc) from exc

    def enqueue(self, batch):
        if not batch.targets:
            return
        bid = uuid.uuid4().hex
        key = PREFIX + 'batch.' + bid
        fields = {'p': batch.project or '', 'q': batch.queue,
                  'pub': repr(batch.published), 'dl': repr(batch.deadline),
                  'n': 0, 'm': json.dumps([len(b) for b in batch.bodies])}
        for i, bodies in enumerate(batch.bodies):
            for j, body in enumerate(bodies):
                fields['b%d.%d' % (i, j)] = body
        for i, headers in enumerate(batch.headers):
            fields['h%d' % i] = json.dumps(headers)
        for i, policy in enumerate(batch.policies):
            fields['o%d' % i] = json.dumps(policy or {})
        if any(batch.keys):
            fields['ks'] = json.dumps(list(batch.keys))
        per_chunk = max(1, CHUNK_DELIVERIES // max(
            1, max(len(b) for b in batch.bodies)))
        # JSON encodes each Target tuple as the array the script reads;
        # targets shared by posts are encoded once.
        targets = batch.targets
        chunks = base.derived(targets, ('redis', per_chunk), lambda: [
            json.dumps(targets[i:i + per_chunk])
            for i in range(0, len(targets), per_chunk)])
        pipe = self._client.pipeline(transaction=True)
        pipe.hset(key, mapping=fields)
        pipe.rpush(key + '.t', *chunks)
        pipe.rpush(PREFIX + 'inbox', bid)
        self._call(pipe.execute)

    def claim(self, now, limit, lease_seconds):
        if limit < 1:
            return []
        token = uuid.uuid4().hex
        rows = self._call(self._claim, args=[
            PREFIX, CHUNKS_PER_CLAIM, repr(now), limit,
            repr(now + lease_seconds), token, SCAN_FACTOR])
        decoded = _Decoded()
        return [decoded.delivery(row, token) for row in json.loads(rows)]

    def retry(self, delivery, due, error, now):
        return self.record([base.Outcome(delivery, base.RETRIED, error, due,
                                         now)])[0]

    def finish(self, delivery, outcome, error, now):
        return self.record([base.Outcome(delivery, outcome, error,
                                         now=now)])[0]

    def record(self, outcomes):
        # One script call for many outcomes.
        rows = []
        for o in outcomes:
            if o.event != base.RETRIED:
                _check_outcome(o.event)
            rows.append((str(o.delivery.id), o.delivery.token, o.event,
                         repr(o.due), o.error or '', repr(o.now)))
        if not rows:
            return []
        kept = self._call(self._record, args=[PREFIX, json.dumps(rows)])
        return [flag == '1' for flag in _text(kept)]

    def next_due(self):
        pipe = self._client.pipeline(transaction=False)
        pipe.llen(PREFIX + 'inbox')
        pipe.zrange(PREFIX + 'due', 0, 0, withscores=True)
        waiting, first = self._call(pipe.execute)
        if waiting:
            return 0.0
        return first[0][1] if first else None

    def stats(self, project=None, queue=None, subscription_id=None):
        if queue is not None and subscription_id is not None:
            keys = [subscriber_key(project, queue, subscription_id)]
        else:
            keys = sorted(_text(k) for k in self._call(
                self._client.smembers, PREFIX + 'subs'))
        selected = []
        for key in keys:
            q, sub_id, proj = key.split('/', 2)
            if ((project is None or proj == (project or ''))
                    and (queue is None or q == queue)):
                selected.append((key, q, sub_id, proj))
        # One round trip for all of them.
        pipe = self._client.pipeline(transaction=False)
        for key, _, _, _ in selected:
            pipe.hgetall(PREFIX + 's.' + key)
            pipe.zcard(PREFIX + 'q.' + key)
            pipe.zcard(PREFIX + 'qk.' + key)
        answers = self._call(pipe.execute)
        found = []
        for (key, q, sub_id, proj), counts, unkeyed, keyed in zip(
                selected, answers[0::3], answers[1::3], answers[2::3]):
            pending = unkeyed + keyed
            counts = {_text(k): _text(v) for k, v in counts.items()}
            if not counts and not pending:
                continue
            found.append(base.SubscriberStats(
                project=proj or None, queue=q, subscription_id=sub_id,
                subscriber=counts.get('url'), pending=pending,
                retrying=int(counts.get('retrying', 0)),
                delivered=int(counts.get(base.DELIVERED, 0)),
                dropped=int(counts.get(base.DROPPED, 0)),
                expired=int(counts.get(base.EXPIRED, 0)),
                last_error=counts.get('err'),
                last_error_at=(float(counts['err_at'])
                               if 'err_at' in counts else None)))
        return found

    def forget(self, project, queue, subscription_id):
        return self._call(self._forget, args=[
            PREFIX, subscriber_key(project, queue, subscription_id),
            FORGOTTEN_SECONDS])


def _check_outcome(outcome):
    if outcome not in base.OUTCOMES:
        raise ValueError('outcome must be one of %s, not %r'
                         % (', '.join(base.OUTCOMES), outcome))


class _Decoded:
    """Builds the deliveries of one claim, decoding shared JSON once."""

    def __init__(self):
        self._json = {}

    def _load(self, text):
        value = self._json.get(text)
        if value is None:
            value = self._json[text] = json.loads(text)
        return value

    def delivery(self, row, token):
        """Return the :class:`Delivery` of a row of the claim script."""
        (id_, url, strategy, policy, headers, published, deadline, attempts,
         body, key) = row
        queue, sub_id, project = key.split('/', 2)
        return base.Delivery(
            id=int(id_), project=project or None, queue=queue,
            subscription_id=sub_id, subscriber=url,
            headers=dict(self._load(headers)), strategy=strategy,
            policy=self._load(policy), published=float(published),
            deadline=float(deadline), body=body, attempts=int(attempts),
            token=token)
