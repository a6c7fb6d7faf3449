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

"""Binding keys (``binding_keys``) and routing keys: CMQ / RabbitMQ topics.

Keys are words separated by ``.``. In a binding key, ``*`` matches exactly
one word and ``#`` matches zero or more words; a routing key has no
wildcards. ``1.#.0`` matches ``1.0`` and ``1.2.3.0``; ``#`` matches every
routing key.
"""

import unicodedata

from zaqar_filtering.policy.errors import InvalidPolicy
from zaqar_filtering.policy.values import describe

STAR = '*'
HASH = '#'


def parse_binding_keys(value, option, limits):
    """Return the distinct binding keys of ``value`` as word tuples.

    :returns: a frozenset of word tuples, or None if the list is empty.

    :raises InvalidPolicy: if ``value`` is not a list of valid binding keys.
    """
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidPolicy(option, 'binding_keys_type',
                            'must be a list of binding keys, not %s'
                            % describe(value))
    keys = frozenset(_split(key, option, limits, 'binding key', True)
                     for key in value)
    if len(keys) > limits.max_binding_keys:
        raise InvalidPolicy(option, 'binding_keys_count',
                            '%d binding keys; the limit is %d'
                            % (len(keys), limits.max_binding_keys))
    return keys or None


def parse_routing_key(value, option, limits, strict=True):
    """Return the words of a routing key as a tuple, or None if absent.

    ``strict=False`` checks the type only (limits are the API's business).
    :raises InvalidPolicy: if ``value`` is not a valid routing key.
    """
    if value is None:
        return None
    if not strict:
        if not isinstance(value, str):
            raise InvalidPolicy(option, 'routing_key_type',
                                'must be a string, not %s' % describe(value))
        return tuple(value.split('.'))
    return _split(value, option, limits, 'routing key', False)


def join(words):
    """Return the text of a key from its words."""
    return '.'.join(words)


def _split(key, option, limits, what, wildcards):
    rule = what.replace(' ', '_')
    if not isinstance(key, str):
        raise InvalidPolicy(option, rule + '_type',
                            '%s %s is not a string' % (what, describe(key)))
    size = len(key.encode('utf-8', 'surrogatepass'))
    if size > limits.max_key_bytes:
        raise InvalidPolicy(option, rule + '_bytes',
                            '%s %s has %d bytes; the limit is %d'
                            % (what, describe(key), size,
                               limits.max_key_bytes))
    words = tuple(key.split('.'))
    if len(words) > limits.max_key_words:
        raise InvalidPolicy(option, rule + '_words',
                            '%s %s has %d words; the limit is %d'
                            % (what, describe(key), len(words),
                               limits.max_key_words))
    for word in words:
        if not word:
            raise InvalidPolicy(option, rule + '_empty_word',
                                '%s %s has an empty word; words are separated'
                                ' by single dots and are never empty'
                                % (what, describe(key)))
        if word in (STAR, HASH) and wildcards:
            continue
        if STAR in word or HASH in word:
            raise InvalidPolicy(option, rule + '_wildcard',
                                "%s %s: '*' and '#' are wildcards that stand "
                                'alone as words in binding keys only'
                                % (what, describe(key)))
        if any(unicodedata.category(c) == 'Cc' for c in word):
            raise InvalidPolicy(option, rule + '_control_character',
                                '%s %s contains a control character'
                                % (what, describe(key)))
    return words


def key_matches(pattern, words):
    """Return whether the binding key ``pattern`` matches routing ``words``.

    Both are word tuples. This is the reference rule that the topic trie of
    :class:`zaqar_filtering.Matcher` must agree with.
    """
    states = _closure(pattern, {0})
    for word in words:
        following = set()
        for i in states:
            if i < len(pattern):
                if pattern[i] == HASH:
                    following.add(i)
                elif pattern[i] == STAR or pattern[i] == word:
                    following.add(i + 1)
        states = _closure(pattern, following)
        if not states:
            return False
    return len(pattern) in states


def explain(keys, words):
    """Return why a routing key matches no binding key, or None.

    :param keys: the subscription's binding keys (word tuples).
    :param words: the message's routing key as words, or None.
    """
    wanted = '[%s]' % ', '.join(sorted(join(key) for key in keys))
    if words is None:
        return ('the message has no routing key (the subscription wants one '
                'matching %s)' % wanted)
    if any(key_matches(key, words) for key in keys):
        return None
    return 'routing key %s matches none of %s' % (
        describe(join(words)), wanted)


def _closure(pattern, states):
    # '#' may match zero words: step over it without consuming one.
    result = set(states)
    for i in sorted(states):
        while i < len(pattern) and pattern[i] == HASH:
            i += 1
            result.add(i)
    return result
