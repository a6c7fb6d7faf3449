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

"""Tag lists (``filter_policies``): the Zaqar spec and Tencent CMQ tags.

A subscriber with tags receives a message only when the message carries at
least one of them; a subscriber without tags receives every message.
"""

import unicodedata

from zaqar_filtering.policy.errors import InvalidPolicy
from zaqar_filtering.policy.values import describe


def parse_tags(value, option, limits, strict=True):
    """Return the distinct tags of ``value`` as a frozenset, or None if empty.

    :param value: the option or message field as given.
    :param option: its name, for errors.
    :param limits: a :class:`Limits`; ``strict=False`` checks types only.
    :raises InvalidPolicy: if ``value`` is not a list of valid tags.
    """
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidPolicy(option, 'tags_type',
                            'must be a list of tags, not %s' % describe(value))
    for tag in value:
        _check_tag(tag, option, limits, strict)
    tags = frozenset(value)
    if strict and len(tags) > limits.max_tags:
        raise InvalidPolicy(option, 'tags_count',
                            '%d tags; the limit is %d'
                            % (len(tags), limits.max_tags))
    return tags or None


def _check_tag(tag, option, limits, strict):
    if not isinstance(tag, str):
        raise InvalidPolicy(option, 'tag_type',
                            'tag %s is not a string' % describe(tag))
    if not strict:
        return
    if not 1 <= len(tag) <= limits.max_tag_length:
        raise InvalidPolicy(option, 'tag_length',
                            'tag %s has %d characters; the limit is %d'
                            % (describe(tag), len(tag), limits.max_tag_length)
                            if tag else
                            'tag %s is empty; a tag has 1 to %d characters'
                            % (describe(tag), limits.max_tag_length))
    for char in tag:
        if unicodedata.category(char) == 'Cc':
            raise InvalidPolicy(option, 'tag_control_character',
                                'tag %s contains the control character '
                                'U+%04X' % (describe(tag), ord(char)))


def explain(wanted, found):
    """Return why a message's tags miss a subscription's, or None.

    :param wanted: the subscription's tags (a frozenset).
    :param found: the message's tags (a frozenset), or None.
    """
    if found is None:
        return ('the message has no tags (the subscription wants one of %s)'
                % show(wanted))
    if wanted.isdisjoint(found):
        return "the message's tags %s share none of %s" % (
            show(found), show(wanted))
    return None


def show(found):
    """Return tags as ``[a, b]``, sorted."""
    return '[%s]' % ', '.join(sorted(found))
