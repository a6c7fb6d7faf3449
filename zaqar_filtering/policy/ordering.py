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

"""Ordered queues (Xiaomi EMQ's TopicQueue): the queue flag and the key.

A queue whose metadata has ``"_ordered_by_key": true`` hands out, of each
``ordering_key``, only the oldest undeleted message to claims. Messages
without a key are not ordered.
"""

import unicodedata

from zaqar_filtering.policy.errors import InvalidPolicy
from zaqar_filtering.policy.values import describe

#: The queue metadata flag of an ordered queue.
ORDERED_BY_KEY = '_ordered_by_key'
#: The message field that names the message's key.
ORDERING_KEY = 'ordering_key'


def is_ordered(metadata):
    """Whether a queue with this metadata is ordered by key."""
    return bool(metadata) and metadata.get(ORDERED_BY_KEY) is True


def check_queue_metadata(metadata):
    """Check the ordering flag of a queue's metadata, if it has one.

    :raises InvalidPolicy: if ``_ordered_by_key`` is not a boolean.
    """
    if not metadata or ORDERED_BY_KEY not in metadata:
        return
    value = metadata[ORDERED_BY_KEY]
    if not isinstance(value, bool):
        raise InvalidPolicy(ORDERED_BY_KEY, 'ordered_by_key_type',
                            'must be true or false, not %s'
                            % describe(value))


def parse_ordering_key(value, limits):
    """Return the ordering key ``value`` after checking it.

    :param limits: a :class:`Limits`.
    :raises InvalidPolicy: unless ``value`` is a string of 1 to
        ``limits.max_ordering_key_length`` characters without control
        characters.
    """
    if not isinstance(value, str):
        raise InvalidPolicy(ORDERING_KEY, 'ordering_key_type',
                            'must be a string, not %s' % describe(value))
    most = limits.max_ordering_key_length
    if not value:
        raise InvalidPolicy(ORDERING_KEY, 'ordering_key_length',
                            'is empty; an ordering key has 1 to %d '
                            'characters' % most)
    if len(value) > most:
        raise InvalidPolicy(ORDERING_KEY, 'ordering_key_length',
                            '%s has %d characters; the limit is %d'
                            % (describe(value), len(value), most))
    for char in value:
        if unicodedata.category(char) == 'Cc':
            raise InvalidPolicy(ORDERING_KEY, 'ordering_key_control_character',
                                '%s contains the control character U+%04X'
                                % (describe(value), ord(char)))
    return value
