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

"""Ordered claims on Zaqar's MongoDB store.

Zaqar keeps each message as a document of its queue's messages
collection: ``p_q`` (project/queue), ``k`` (posting order), ``d`` (when it
becomes visible), ``c`` (claim: ``id``, ``e`` expiry), ``e`` (expiry),
``tx`` (None once the post is done). For ordered claims a keyed message
also has ``zk``, its ordering key, written with the document in the same
``insert_many``. A key's head is its live message with the least
``(d, k)``; a claim takes the free heads and the free unkeyed messages,
which it finds through the index ``ordering`` (``p_q``, ``zk``, ``k``)
without passing the keyed ones.

Zaqar's claim then sets the claim with ``update_many`` on those ids where
``c.e <= now``, so of two claimers that chose the same head only one gets
it; no claimer can choose a later message of a key while its head lives.
"""

import contextvars
import datetime

from oslo_utils import timeutils
from zaqar.storage.mongodb import claims
from zaqar.storage.mongodb import messages
from zaqar.storage.mongodb import utils

from zaqar_filtering.policy.ordering import ORDERING_KEY

#: The document field of a message's ordering key.
KEY_FIELD = 'zk'
#: The index of a queue's messages by key, then posting order; its
#: ``zk: None`` range holds the unkeyed messages.
ORDERING_INDEX_FIELDS = [('p_q', 1), (KEY_FIELD, 1), ('k', 1)]

# The ordering keys of the messages being posted, set only while
# MessageController.post runs.
_POSTING = contextvars.ContextVar('zaqar_filtering_mongo_posting',
                                  default=None)


def claimable(collection, scope, now, limit):
    """Return up to ``limit`` messages a claim may take, oldest first.

    :param collection: the queue's messages collection.
    :param scope: the queue's ``p_q`` value.
    :param now: the time, as Zaqar's integer timestamp.
    :returns: documents with ``_id``, ``c``, ``d`` and ``k``.
    """
    live = {'p_q': scope, 'tx': None,
            'e': {'$gt': datetime.datetime.fromtimestamp(
                now, tz=datetime.UTC).replace(tzinfo=None)}}
    free = {'c.e': {'$lte': now},
            '$or': [{'d': {'$lte': now}}, {'d': {'$exists': False}}]}
    fields = {'_id': 1, 'c': 1, 'd': 1, 'k': 1}
    heads = collection.aggregate([
        {'$match': dict(live, **{KEY_FIELD: {'$exists': True}})},
        {'$sort': {KEY_FIELD: 1, 'd': 1, 'k': 1}},
        {'$group': {'_id': '$' + KEY_FIELD, 'head': {'$first': '$$ROOT'}}},
        {'$replaceRoot': {'newRoot': '$head'}},
        {'$match': free},
        {'$sort': {'d': 1, 'k': 1}},
        {'$limit': limit},
        {'$project': fields},
    ])
    # Keys are never null: None selects the messages without one.
    unkeyed = collection.find(
        dict(live, **free, **{KEY_FIELD: None}),
        projection=fields, sort=[('k', 1)]).limit(limit)
    found = list(heads) + list(unkeyed)
    found.sort(key=lambda message: (message.get('d', 0), message['k']))
    return found[:limit]


class _KeyingCollection:
    """A messages collection whose ``insert_many`` adds ordering keys."""

    def __init__(self, collection, keys):
        self._collection = collection
        self._keys = keys

    def insert_many(self, documents, *args, **kwargs):
        documents = list(documents)
        for document, key in zip(documents, self._keys):
            if key:
                document[KEY_FIELD] = key
        return self._collection.insert_many(documents, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._collection, name)


class MessageController(messages.MessageController):
    """Zaqar's MongoDB message controller, storing each ``ordering_key``."""

    def post(self, queue_name, messages, client_uuid, project=None):
        messages = list(messages)
        token = _POSTING.set([message.get(ORDERING_KEY)
                              for message in messages])
        try:
            return super().post(queue_name, messages, client_uuid,
                                project=project)
        finally:
            _POSTING.reset(token)

    def _ensure_indexes(self, collection):
        super()._ensure_indexes(collection)
        collection.create_index(ORDERING_INDEX_FIELDS, name='ordering',
                                background=True)

    def _collection(self, queue_name, project=None):
        collection = super()._collection(queue_name, project)
        keys = _POSTING.get()
        return collection if keys is None else _KeyingCollection(collection,
                                                                 keys)


class _Candidates(MessageController):
    """Zaqar's message controller, active meaning claimable in order.

    Only Zaqar's claim ``create`` asks it for active messages.
    """

    def _active(self, queue_name, marker=None, echo=False,
                client_uuid=None, projection=None, project=None,
                limit=None, include_delayed=False):
        return claimable(self._collection(queue_name, project),
                         utils.scope_queue_name(queue_name, project),
                         timeutils.utcnow_ts(), limit)


class _Driver:
    """A data driver whose message controller is :class:`_Candidates`."""

    def __init__(self, driver):
        self._driver = driver
        self.message_controller = _Candidates(driver)

    def __getattr__(self, name):
        return getattr(self._driver, name)


class ClaimController(claims.ClaimController):
    """Zaqar's MongoDB claim controller, claiming only the heads of keys."""

    def __init__(self, driver):
        super().__init__(_Driver(driver))
