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

"""Ordered claims (EMQ's TopicQueue) on Zaqar's own stores.

:func:`backend_for` gives the ordering controllers of a Zaqar data driver:
a message controller whose ``post`` stores each message's ``ordering_key``
with the message, and a claim controller whose ``create`` claims, of each
key, only the oldest undeleted message. Both subclass Zaqar's controllers
of that store and change only how messages are stored and chosen.
"""

import collections

from zaqar.storage.mongodb import driver as mongodb_driver
from zaqar.storage.redis import driver as redis_driver

#: The controllers that order a queue's claims on one store.
Ordering = collections.namedtuple('Ordering', 'messages claims')


def backend_for(driver):
    """Return the :class:`Ordering` of a Zaqar data driver, or None.

    None for stores (swift, mongodb.fifo) and pooled drivers that this
    cannot order.
    """
    if isinstance(driver, redis_driver.DataDriver):
        from zaqar_filtering.ordering import redis
        return Ordering(redis.MessageController(driver),
                        redis.ClaimController(driver))
    if isinstance(driver, mongodb_driver.FIFODataDriver):
        return None
    if isinstance(driver, mongodb_driver.DataDriver):
        from zaqar_filtering.ordering import mongodb
        return Ordering(mongodb.MessageController(driver),
                        mongodb.ClaimController(driver))
    return None
