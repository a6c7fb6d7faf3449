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

"""Ordered claims on Zaqar's redis store.

Zaqar keeps a queue's message ids in a sorted set ranked in posting order
(``<project>.<queue>.messages``) and each message in a hash named by its
id. For ordered claims this adds, per queue:

* field ``zk`` of a message's hash: its ordering key;
* ``zf.ordering.<msgset>.k.<key>``: a sorted set of the key's messages,
  scored by when each becomes visible (Zaqar's delay expiry ``d``), members
  ``<rank, 20 digits><message id>`` so that ties keep posting order; its
  first member is the key's head;
* ``zf.ordering.<msgset>.keys``: a sorted set of the keys, scored by when
  their head becomes visible;
* ``zf.ordering.<msgset>.u``: a sorted set of the queue's messages without
  a key here (none, or one from the queue a dead-lettered message came
  from), scored by rank, so that a claim finds them without walking past
  the keyed ones; ``zf.ordering.<msgset>.filed``: the rank up to which the
  queue's messages are filed in it.

The key sets are written by the script that ranks the posted messages;
the claim script first files the messages ranked since the last claim
(also those Zaqar posted itself: batches without a key, dead letters,
messages from before the queue was ordered), then claims. Each runs
atomically in redis, so any number of claimers in any number of processes
never see a key half-posted and never claim two messages of a key at
once. Deleted, expired and dead-lettered messages leave the sets lazily,
when a claim meets them.
"""

import contextvars

from zaqar.storage.redis import claims
from zaqar.storage.redis import messages
from zaqar.storage.redis import utils as redis_utils

from zaqar_filtering.policy.ordering import ORDERING_KEY

#: Seconds the key sets outlive the longest-lived message posted into
#: them: a claim may extend a message's life by its ttl and grace, each at
#: most 12 hours in Zaqar.
KEEP_SECONDS = 86400
#: Seconds the set of unkeyed messages and its mark outlive the last claim
#: (together: the next claim files the queue again from its start).
FILED_KEEP_SECONDS = 7 * 86400

# Lua 5.1: '%020.0f' prints ranks (doubles) without losing digits.
_INDEX = """
local msgset_key, counter_key, keys_key = KEYS[1], KEYS[2], KEYS[3]
local prefix = ARGV[1]
local expires = tonumber(ARGV[2])
local count = tonumber(ARGV[3])
local rank = tonumber(redis.call('GET', counter_key) or 1)
local zadd = {'ZADD', msgset_key}
for i = 0, count - 1 do
  local mid, key = ARGV[4 + 2 * i], ARGV[5 + 2 * i]
  zadd[#zadd + 1] = rank + i
  zadd[#zadd + 1] = mid
  if key ~= '' then
    local visible = tonumber(redis.call('HGET', mid, 'd') or 0)
    local key_set = prefix .. 'k.' .. key
    redis.call('HSET', mid, 'zk', key)
    redis.call('ZADD', key_set, visible,
               string.format('%020.0f', rank + i) .. mid)
    local head = redis.call('ZRANGE', key_set, 0, 0, 'WITHSCORES')
    redis.call('ZADD', keys_key, head[2], key)
    if redis.call('TTL', key_set) < expires then
      redis.call('EXPIRE', key_set, expires)
    end
  end
end
redis.call(unpack(zadd))
redis.call('SET', counter_key, rank + count)
if redis.call('TTL', keys_key) < expires then
  redis.call('EXPIRE', keys_key, expires)
end
"""

# Candidates are the claimable heads of the keys and the claimable unkeyed
# messages, each kind at most `limit`; the oldest `limit` of them (by
# visibility, then rank) are claimed as Zaqar's own script claims.
_CLAIM = """
local msgset_key, keys_key, counter_key = KEYS[1], KEYS[2], KEYS[3]
local unkeyed_key, filed_key = KEYS[4], KEYS[5]
local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local claim_id = ARGV[3]
local claim_expires = tonumber(ARGV[4])
local msg_ttl = tonumber(ARGV[5])
local msg_expires = tonumber(ARGV[6])
local prefix = ARGV[7]
local filed_keep = tonumber(ARGV[8])
local BATCH = 100

-- ZREM of many members, in slices that Lua's unpack can take.
local function zrem_all(key, members)
  for i = 1, #members, 1000 do
    redis.call('ZREM', key, unpack(members, i, math.min(i + 999, #members)))
  end
end

local function free(msg)
  return (msg[1] == '' or tonumber(msg[2]) <= now)
    and tonumber(msg[3]) <= now
end

local candidates = {}
local expired = {}
local keyed = 0
local gone_keys = {}
local moved_keys = {}
local offset = 0
while keyed < limit do
  local keys = redis.call('ZRANGEBYSCORE', keys_key, '-inf', now,
                          'LIMIT', offset, BATCH)
  if #keys == 0 then break end
  offset = offset + #keys
  for _, key in ipairs(keys) do
    local key_set = prefix .. 'k.' .. key
    while true do
      local head = redis.call('ZRANGE', key_set, 0, 0, 'WITHSCORES')
      if #head == 0 then
        gone_keys[#gone_keys + 1] = key
        break
      end
      local mid = string.sub(head[1], 21)
      local msg = redis.call('HMGET', mid, 'c', 'c.e', 'd')
      if msg[3] == false or not redis.call('ZSCORE', msgset_key, mid) then
        -- Deleted, expired, or moved to a dead letter queue.
        redis.call('ZREM', key_set, head[1])
        if msg[3] == false then
          expired[#expired + 1] = mid
        end
      else
        moved_keys[#moved_keys + 1] = {head[2], key}
        if free(msg) then
          candidates[#candidates + 1] = {mid, tonumber(msg[3]),
                                         tonumber(string.sub(head[1], 1, 20))}
          keyed = keyed + 1
        end
        break
      end
    end
    if keyed >= limit then break end
  end
end
for _, key in ipairs(gone_keys) do
  redis.call('ZREM', keys_key, key)
end
for _, moved in ipairs(moved_keys) do
  redis.call('ZADD', keys_key, moved[1], moved[2])
end

-- Files the messages ranked since the last claim: those without a key
-- here (no key, or keyed in the queue they came from) go to the unkeyed
-- set. Ranks only grow (Zaqar never resets a queue's counter; if it is
-- gone, all is filed again).
local counter = tonumber(redis.call('GET', counter_key) or 0)
local filed = redis.call('GET', filed_key)
if filed and tonumber(filed) >= counter then
  filed = nil
  redis.call('DEL', unkeyed_key)
end
while true do
  local ids = redis.call('ZRANGEBYSCORE', msgset_key,
                         filed and ('(' .. filed) or '-inf', '+inf',
                         'WITHSCORES', 'LIMIT', 0, BATCH)
  if #ids == 0 then break end
  for i = 1, #ids, 2 do
    local mid, rank = ids[i], ids[i + 1]
    local msg = redis.call('HMGET', mid, 'd', 'zk')
    if msg[1] == false then
      expired[#expired + 1] = mid
    elseif msg[2] == false or not redis.call(
        'ZSCORE', prefix .. 'k.' .. msg[2],
        string.format('%020.0f', tonumber(rank)) .. mid) then
      redis.call('ZADD', unkeyed_key, rank, mid)
    end
  end
  filed = ids[#ids]
end
if filed then
  redis.call('SET', filed_key, filed, 'EX', filed_keep)
  redis.call('EXPIRE', unkeyed_key, filed_keep)
end

local unkeyed = 0
local gone = {}
local start = 0
while unkeyed < limit do
  local ids = redis.call('ZRANGE', unkeyed_key, start, start + BATCH - 1,
                         'WITHSCORES')
  if #ids == 0 then break end
  start = start + BATCH
  for i = 1, #ids, 2 do
    local mid, rank = ids[i], tonumber(ids[i + 1])
    local msg = redis.call('HMGET', mid, 'c', 'c.e', 'd')
    if msg[3] == false or not redis.call('ZSCORE', msgset_key, mid) then
      -- Deleted, expired, or moved to a dead letter queue.
      gone[#gone + 1] = mid
      if msg[3] == false then
        expired[#expired + 1] = mid
      end
    elseif free(msg) then
      candidates[#candidates + 1] = {mid, tonumber(msg[3]), rank}
      unkeyed = unkeyed + 1
      if unkeyed >= limit then break end
    end
  end
end
zrem_all(unkeyed_key, gone)
zrem_all(msgset_key, expired)

table.sort(candidates, function(a, b)
  if a[2] ~= b[2] then return a[2] < b[2] end
  return a[3] < b[3]
end)
local claimed = {}
for i = 1, math.min(limit, #candidates) do
  local mid = candidates[i][1]
  redis.call('HMSET', mid, 'c', claim_id, 'c.e', claim_expires)
  if tonumber(redis.call('HGET', mid, 'e')) < claim_expires then
    redis.call('HMSET', mid, 't', msg_ttl, 'e', msg_expires)
  end
  claimed[#claimed + 1] = mid
end
return claimed
"""

# The ordering keys of the messages being posted, set only while
# MessageController.post runs (Zaqar's post calls _index_messages).
_POSTING = contextvars.ContextVar('zaqar_filtering_posting', default=None)


def _prefix(msgset_key):
    if isinstance(msgset_key, bytes):
        msgset_key = msgset_key.decode()
    return 'zf.ordering.%s.' % msgset_key


def _counter_key(msgset_key):
    """Return the key of a queue's rank counter, from its message set's.

    Both are ``<project>.<queue>.<suffix>`` (zaqar.storage.redis.utils).
    """
    if isinstance(msgset_key, bytes):
        msgset_key = msgset_key.decode()
    scope = msgset_key[:-len(redis_utils.MESSAGE_IDS_SUFFIX)]
    return scope + messages.MESSAGE_RANK_COUNTER_SUFFIX


class MessageController(messages.MessageController):
    """Zaqar's redis message controller, storing each ``ordering_key``."""

    def post(self, queue, messages, client_uuid, project=None):
        messages = list(messages)
        keys = [message.get(ORDERING_KEY) or '' for message in messages]
        expires = max(message['ttl'] for message in messages) + KEEP_SECONDS
        token = _POSTING.set((keys, expires))
        try:
            return super().post(queue, messages, client_uuid,
                                project=project)
        finally:
            _POSTING.reset(token)

    def _index_messages(self, msgset_key, counter_key, message_ids):
        posting = _POSTING.get()
        if posting is None:
            # Zaqar moving a message to a dead letter queue.
            return super()._index_messages(msgset_key, counter_key,
                                           message_ids)
        keys, expires = posting
        prefix = _prefix(msgset_key)
        args = [prefix, expires, len(message_ids)]
        for message_id, key in zip(message_ids, keys):
            args += [message_id, key]
        self._index_script(keys=[msgset_key, counter_key, prefix + 'keys'],
                           args=args)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._index_script = self._client.register_script(_INDEX)


class ClaimController(claims.ClaimController):
    """Zaqar's redis claim controller, claiming only the heads of keys."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._claim_script = self._client.register_script(_CLAIM)

    def _claim_messages(self, msgset_key, now, limit, claim_id,
                        claim_expires, msg_ttl, msg_expires):
        prefix = _prefix(msgset_key)
        return self._claim_script(
            keys=[msgset_key, prefix + 'keys', _counter_key(msgset_key),
                  prefix + 'u',
                  prefix + 'filed'],
            args=[now, limit, claim_id, claim_expires, msg_ttl, msg_expires,
                  prefix, FILED_KEEP_SECONDS])
