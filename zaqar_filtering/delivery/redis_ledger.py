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

Keys, under ``zaqar_filtering.delivery.``:

- ``seq``: the last delivery id; ids grow in publication order.
- ``e.<id>``: a hash per pending delivery.
- ``due``: sorted set of ids by due time (a claim moves it to the lease's
  end).
- ``q.<sub>``: sorted set of a subscriber's pending ids, by id.
- ``p.<sub>``: sorted set of a subscriber's parked ids, by due time.
- ``b.<sub>``: the id that blocks a blocking subscriber.
- ``s.<sub>``: a hash of the subscriber's counts and last error.
- ``subs``: the set of subscribers with pending deliveries or counts.

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
STORE = 'delivery ledger (redis)'

# Moves parked deliveries of subscriber KEY back to "due": all of them when
# ALL is true, else only the subscriber's oldest pending one if parked.
_UNPARK = """
local function unpark(P, k, all)
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
"""

_ENQUEUE = """
local P = ARGV[1]
local d = cjson.decode(ARGV[2])
local k = d.k
local n = #d.bodies
local last = redis.call('INCRBY', P .. 'seq', n)
local qkey = P .. 'q.' .. k
local waits = false
if d.st == 'backoff' then
  waits = redis.call('ZCARD', qkey) > 0
elseif d.st == 'exponential_decay' then
  waits = redis.call('EXISTS', P .. 'b.' .. k) == 1
end
redis.call('SADD', P .. 'subs', k)
redis.call('HSET', P .. 's.' .. k, 'url', d.url)
for i = 1, n do
  local id = last - n + i
  redis.call('HSET', P .. 'e.' .. id, 'k', k, 'url', d.url, 'st', d.st,
             'pol', d.pol, 'hdr', d.hdr, 'pub', d.pub, 'dl', d.dl,
             'a', 0, 'tok', '', 'body', d.bodies[i])
  redis.call('ZADD', qkey, id, id)
  if waits then
    redis.call('ZADD', P .. 'p.' .. k, d.now, id)
  else
    redis.call('ZADD', P .. 'due', d.now, id)
  end
  if d.st == 'backoff' then
    waits = true
  end
end
return last
"""

_CLAIM = """
local P = ARGV[1]
local limit = tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', P .. 'due', '-inf', ARGV[2],
                       'LIMIT', 0, limit * tonumber(ARGV[6]))
local out = {}
for _, id in ipairs(ids) do
  if #out >= limit then
    break
  end
  local ekey = P .. 'e.' .. id
  local f = redis.call('HMGET', ekey, 'k', 'st')
  local k, st = f[1], f[2]
  if not k then
    redis.call('ZREM', P .. 'due', id)
  else
    local ok = true
    if st == 'backoff' then
      ok = redis.call('ZRANGE', P .. 'q.' .. k, 0, 0)[1] == id
    elseif st == 'exponential_decay' then
      local b = redis.call('GET', P .. 'b.' .. k)
      ok = (not b) or b == id
    end
    if ok then
      redis.call('ZADD', P .. 'due', ARGV[4], id)
      redis.call('HSET', ekey, 'tok', ARGV[5])
      local row = redis.call('HGETALL', ekey)
      table.insert(row, 'id')
      table.insert(row, id)
      table.insert(out, row)
    else
      local score = redis.call('ZSCORE', P .. 'due', id)
      redis.call('ZREM', P .. 'due', id)
      redis.call('ZADD', P .. 'p.' .. k, score, id)
    end
  end
end
return out
"""

_RETRY = """
local P, id = ARGV[1], ARGV[2]
local ekey = P .. 'e.' .. id
local f = redis.call('HMGET', ekey, 'k', 'tok', 'a', 'st')
if not f[1] or f[2] ~= ARGV[3] then
  return 0
end
local k = f[1]
local attempts = tonumber(f[3]) + 1
redis.call('HSET', ekey, 'a', attempts, 'tok', '')
redis.call('ZADD', P .. 'due', ARGV[4], id)
local skey = P .. 's.' .. k
if attempts == 1 then
  redis.call('HINCRBY', skey, 'retrying', 1)
end
redis.call('HSET', skey, 'err', ARGV[5], 'err_at', ARGV[6])
if f[4] == 'exponential_decay' and attempts >= 2 then
  redis.call('SET', P .. 'b.' .. k, id, 'NX')
end
return 1
"""

_FINISH = _UNPARK + """
local P, id = ARGV[1], ARGV[2]
local ekey = P .. 'e.' .. id
local f = redis.call('HMGET', ekey, 'k', 'tok', 'a')
if not f[1] or f[2] ~= ARGV[3] then
  return 0
end
local k = f[1]
redis.call('DEL', ekey)
redis.call('ZREM', P .. 'due', id)
redis.call('ZREM', P .. 'q.' .. k, id)
local skey = P .. 's.' .. k
redis.call('HINCRBY', skey, ARGV[4], 1)
if tonumber(f[3]) > 0 then
  redis.call('HINCRBY', skey, 'retrying', -1)
end
if ARGV[5] ~= '' then
  redis.call('HSET', skey, 'err', ARGV[5], 'err_at', ARGV[6])
end
local bkey = P .. 'b.' .. k
local blocker = redis.call('GET', bkey)
if blocker == id then
  redis.call('DEL', bkey)
  unpark(P, k, true)
elseif not blocker then
  unpark(P, k, false)
end
return 1
"""

_FORGET = """
local P, k = ARGV[1], ARGV[2]
local ids = redis.call('ZRANGE', P .. 'q.' .. k, 0, -1)
for _, id in ipairs(ids) do
  redis.call('DEL', P .. 'e.' .. id)
  redis.call('ZREM', P .. 'due', id)
end
redis.call('DEL', P .. 'q.' .. k, P .. 'p.' .. k, P .. 'b.' .. k,
           P .. 's.' .. k)
redis.call('SREM', P .. 'subs', k)
return #ids
"""


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
        self._client = client
        self._errors = (redis.exceptions.ConnectionError,
                        redis.exceptions.TimeoutError)
        self._enqueue = client.register_script(_ENQUEUE)
        self._claim = client.register_script(_CLAIM)
        self._retry = client.register_script(_RETRY)
        self._finish = client.register_script(_FINISH)
        self._forget = client.register_script(_FORGET)

    def _call(self, function, *args, **kwargs):
        try:
            return function(*args, **kwargs)
        except self._errors as exc:
            raise StoreUnavailable(STORE, exc) from exc

    def enqueue(self, new):
        self.enqueue_many([new])

    def enqueue_many(self, news):
        # One round trip for a post's deliveries, however many.
        pipe = self._client.pipeline(transaction=False)
        for new in news:
            self._enqueue(args=[PREFIX, _payload(new)], client=pipe)
        self._call(pipe.execute)

    def claim(self, now, limit, lease_seconds):
        if limit < 1:
            return []
        token = uuid.uuid4().hex
        rows = self._call(self._claim, args=[
            PREFIX, repr(now), limit, repr(now + lease_seconds), token,
            SCAN_FACTOR])
        return [_delivery(row) for row in rows]

    def retry(self, delivery, due, error, now):
        return bool(self._call(self._retry, args=[
            PREFIX, delivery.id, delivery.token, repr(due), error,
            repr(now)]))

    def finish(self, delivery, outcome, error, now):
        if outcome not in base.OUTCOMES:
            raise ValueError('outcome must be one of %s, not %r'
                             % (', '.join(base.OUTCOMES), outcome))
        return bool(self._call(self._finish, args=[
            PREFIX, delivery.id, delivery.token, outcome, error or '',
            repr(now)]))

    def next_due(self):
        first = self._call(self._client.zrange, PREFIX + 'due', 0, 0,
                           withscores=True)
        return first[0][1] if first else None

    def stats(self, project=None, queue=None, subscription_id=None):
        if queue is not None and subscription_id is not None:
            keys = [subscriber_key(project, queue, subscription_id)]
        else:
            keys = sorted(_text(k) for k in self._call(
                self._client.smembers, PREFIX + 'subs'))
        found = []
        for key in keys:
            q, sub_id, proj = key.split('/', 2)
            if ((project is not None and proj != (project or ''))
                    or (queue is not None and q != queue)):
                continue
            pipe = self._client.pipeline(transaction=False)
            pipe.hgetall(PREFIX + 's.' + key)
            pipe.zcard(PREFIX + 'q.' + key)
            counts, pending = self._call(pipe.execute)
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
            PREFIX, subscriber_key(project, queue, subscription_id)])


def _payload(new):
    return json.dumps({
        'k': subscriber_key(new.project, new.queue, new.subscription_id),
        'url': new.subscriber, 'st': new.strategy,
        'pol': json.dumps(new.policy or {}), 'hdr': json.dumps(new.headers),
        'pub': repr(new.published), 'dl': repr(new.deadline),
        'now': repr(new.published), 'bodies': list(new.bodies),
    })


def _delivery(row):
    fields = dict(zip((_text(k) for k in row[0::2]),
                      (_text(v) for v in row[1::2])))
    queue, sub_id, project = fields['k'].split('/', 2)
    return base.Delivery(
        id=int(fields['id']), project=project or None, queue=queue,
        subscription_id=sub_id, subscriber=fields['url'],
        headers=json.loads(fields['hdr']), strategy=fields['st'],
        policy=json.loads(fields['pol']), published=float(fields['pub']),
        deadline=float(fields['dl']), body=fields['body'],
        attempts=int(fields['a']), token=fields['tok'])
