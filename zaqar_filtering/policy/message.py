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

"""The filter fields of a posted message.

A message may carry ``filter_policies`` (tags), ``routing_key`` and
``attributes``; its ``body`` is what ``MessageBody``-scope policies read.
Beside them, ``ordering_key`` orders the claims of an ordered queue (see
:mod:`zaqar_filtering.policy.ordering`).
:func:`validate_message` is the API's strict check. :class:`MessageView` is
the matcher's lenient reading: a field it cannot read counts as absent, so
matching never fails on a message that skipped validation.
"""

import functools
import json

from zaqar_filtering.policy import binding_key
from zaqar_filtering.policy.errors import InvalidPolicy
from zaqar_filtering.policy.limits import DEFAULT_LIMITS
from zaqar_filtering.policy import ordering
from zaqar_filtering.policy import spelling
from zaqar_filtering.policy import tags
from zaqar_filtering.policy import values as v

TAGS = 'filter_policies'
ROUTING_KEY = 'routing_key'
ATTRIBUTES = 'attributes'
BODY = 'body'
FIELDS = (TAGS, ROUTING_KEY, ATTRIBUTES)
ORDERING_KEY = ordering.ORDERING_KEY
#: Every field :func:`validate_message` reads from a posted message.
POSTED_FIELDS = FIELDS + (ORDERING_KEY,)

ATTRIBUTE_TYPES = ('String', 'Number', 'String.Array', 'Binary')

#: The body key under which clients that cannot send top-level fields
#: (Zaqar's websocket transport, the stock zaqar-server) give them.
BODY_FIELDS = '_filtering'


def validate_message(message, limits=DEFAULT_LIMITS):
    """Check the filter fields of one message.

    :param message: a posted message (a dict).
    :param limits: a :class:`Limits`.
    :returns: a dict of the filter fields the message has: tags as a sorted
        list of distinct tags, the routing key, the attributes as given,
        the ordering key.
    :raises InvalidPolicy: naming the field, the value and the rule; also
        for a key that looks like a misspelled filter field.
    """
    if not isinstance(message, dict):
        raise InvalidPolicy('message', 'message_type', 'must be a JSON '
                            'object, not %s' % v.describe(message))
    spelling.check_names(message, POSTED_FIELDS, None, 'field_name')
    fields = {}
    found = tags.parse_tags(message.get(TAGS), TAGS, limits)
    if found:
        fields[TAGS] = sorted(found)
    if message.get(ROUTING_KEY) is not None:
        binding_key.parse_routing_key(message[ROUTING_KEY], ROUTING_KEY,
                                      limits)
        fields[ROUTING_KEY] = message[ROUTING_KEY]
    attributes = message.get(ATTRIBUTES)
    if attributes is not None:
        if not isinstance(attributes, dict):
            raise InvalidPolicy(ATTRIBUTES, 'attributes_type',
                                'must be an object of attribute names to '
                                'values, not %s' % v.describe(attributes))
        for name, value in attributes.items():
            parse_attribute(name, value)
        if attributes:
            fields[ATTRIBUTES] = attributes
    if message.get(ORDERING_KEY) is not None:
        fields[ORDERING_KEY] = ordering.parse_ordering_key(
            message[ORDERING_KEY], limits)
    return fields


def with_body_fields(message, limits=DEFAULT_LIMITS):
    """Return ``message`` with the filter fields its body carries.

    A client that cannot send ``filter_policies``, ``routing_key`` and
    ``attributes`` beside the body puts them in an object under the body's
    ``_filtering`` key instead; that object stays in the stored body.

    :returns: ``message`` itself when its body has no ``_filtering`` key,
        else a copy with the validated fields beside the body.
    :raises InvalidPolicy: if the embedded fields are invalid, unknown, or
        given beside the body as well.
    """
    body = message.get(BODY)
    if not isinstance(body, dict) or BODY_FIELDS not in body:
        return message
    embedded = body[BODY_FIELDS]
    where = (BODY_FIELDS,)
    if not isinstance(embedded, dict):
        raise InvalidPolicy(BODY, 'body_fields_type', 'must be an object of '
                            'filter fields, not %s' % v.describe(embedded),
                            where)
    unknown = sorted(set(embedded) - set(FIELDS), key=str)
    if unknown:
        raise InvalidPolicy(BODY, 'body_fields_unknown', 'unknown field %s; '
                            'the filter fields are %s'
                            % (v.describe(unknown[0]), ', '.join(FIELDS)),
                            where)
    given = [field for field in FIELDS if field in message]
    if given:
        raise InvalidPolicy(BODY, 'body_fields_twice', 'filter fields are '
                            'given in the body and beside it (%s); give them '
                            'once' % ', '.join(given), where)
    try:
        fields = validate_message(embedded, limits)
    except InvalidPolicy as exc:
        raise InvalidPolicy(BODY, exc.rule, exc.detail,
                            where + (exc.option,) + exc.path)
    return dict(message, **fields)


def parse_attribute(name, value):
    """Return the typed values of one message attribute.

    An attribute is a string, a number, a list of strings and numbers, or
    SNS's typed form ``{"Type": ..., "Value": ...}``. ``Binary`` attributes
    take no part in filtering (as in SNS) and give None.

    :raises InvalidPolicy: if the attribute is malformed.
    """
    if type(name) is str and name:
        # The common cases, for the matcher.
        kind = type(value)
        if kind is str:
            return ((v.STRING, value),)
        if kind is dict and len(value) == 2:
            text = value.get('Value')
            if type(text) is str:
                data_type = value.get('Type')
                if data_type == 'String':
                    return ((v.STRING, text),)
                if data_type == 'Number':
                    number = v.number_from_text(text)
                    if number is not None:
                        return ((v.NUMBER, number),)

    def fail(rule, detail):
        raise InvalidPolicy(ATTRIBUTES, rule, detail, (name,))

    if not isinstance(name, str) or not name:
        raise InvalidPolicy(ATTRIBUTES, 'attribute_name', 'attribute name %s '
                            'is not a non-empty string' % v.describe(name))
    if isinstance(value, dict):
        return _parse_typed(value, fail)
    if isinstance(value, list):
        found = tuple(v.from_json(item) for item in value)
        if any(item is None or item[0] not in (v.STRING, v.NUMBER)
               for item in found):
            fail('attribute_value', 'a list attribute holds strings and '
                 'numbers only, not %s' % v.describe(value))
        return found
    found = v.from_json(value)
    if found is None or found[0] not in (v.STRING, v.NUMBER):
        fail('attribute_value', 'an attribute is a string, a number, a list '
             'or {"Type": ..., "Value": ...}, not %s' % v.describe(value))
    return (found,)


def _parse_typed(value, fail):
    if len(value) != 2 or 'Type' not in value or 'Value' not in value:
        fail('attribute_value', 'a typed attribute has exactly the keys '
             '"Type" and "Value", not %s' % v.describe(sorted(value, key=str)))
    kind, text = value['Type'], value['Value']
    if kind not in ATTRIBUTE_TYPES:
        fail('attribute_type', 'Type must be one of %s, not %s'
             % (', '.join(ATTRIBUTE_TYPES), v.describe(kind)))
    if not isinstance(text, str):
        fail('attribute_value', 'the Value of a %s attribute is a string, '
             'not %s' % (kind, v.describe(text)))
    if kind == 'String':
        return ((v.STRING, text),)
    if kind == 'Binary':
        return None
    if kind == 'Number':
        number = v.number_from_text(text)
        if number is None:
            fail('attribute_value', 'the Value of a Number attribute is a '
                 'number, not %s' % v.describe(text))
        return ((v.NUMBER, number),)
    try:
        items = json.loads(text)
    except (ValueError, RecursionError):
        items = None
    found = (tuple(v.from_json(item) for item in items)
             if isinstance(items, list) else (None,))
    if None in found:
        fail('attribute_value', 'the Value of a String.Array attribute is '
             'the JSON text of an array of strings, numbers, booleans and '
             'nulls, not %s' % v.describe(text))
    return found


class PathTree(dict):
    """Dotted body paths arranged for :func:`flatten_body`.

    It maps the path of an object in the body ('' for the body itself) to
    ``{key: path}``: the keys of that object whose path is wanted.
    """

    def __init__(self, wanted):
        """Arrange ``wanted``: dotted paths and their path_prefixes."""
        super().__init__()
        for path in wanted:
            self.setdefault('', {})[path] = path
            dot = path.find('.', 1)  # '' is the body's own path
            while dot >= 0:
                self.setdefault(path[:dot], {})[path[dot + 1:]] = path
                dot = path.find('.', dot + 1)


# The key of an array element or a scalar in flatten_body's walk.
_ELEMENT = object()


def flatten_body(body, wanted=None):
    """Return a dict of dotted path -> tuple of typed values of a JSON body.

    Nested objects join their keys with dots; array elements count on their
    own, arrays of objects and of arrays included. A body that is a string
    is read as JSON text. A body that is not a JSON object gives no fields,
    so a ``MessageBody`` policy never matches it.

    :param wanted: if given, a container of the dotted paths to read and
        their :func:`path_prefixes`, or its :class:`PathTree`; subtrees
        outside it are not visited, which bounds the work by what the
        policies read.
    """
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except (ValueError, RecursionError):
            return {}
    if not isinstance(body, dict):
        return {}
    if wanted is not None and not isinstance(wanted, PathTree):
        wanted = PathTree(wanted)
    fields = {}
    several = {}  # the paths with more than one value so far -> a list
    stack = [('', body)]
    pop, push = stack.pop, stack.append
    while stack:
        path, node = pop()
        if isinstance(node, dict):
            if wanted is None:
                prefix = path + '.' if path else ''
                items = ((prefix + str(key), value)
                         for key, value in node.items())
            else:
                keys = wanted.get(path)
                if keys is None:
                    continue
                items = node.items()
        elif isinstance(node, list):
            if any(isinstance(item, (dict, list)) for item in node):
                stack.extend((path, item) for item in reversed(node))
                continue
            items = ((_ELEMENT, item) for item in node)
        else:
            items = ((_ELEMENT, node),)
        for key, value in items:
            if key is _ELEMENT:
                key = path
            elif wanted is not None:
                key = keys.get(key if type(key) is str else str(key))
                if key is None:
                    continue
            # A scalar: v.from_json, with the common string case inlined.
            if type(value) is str:
                value = (v.STRING, value)
            elif isinstance(value, (dict, list)):
                push((key, value))
                continue
            else:
                value = v.from_json(value)
                if value is None:
                    continue
            found = fields.get(key)
            if found is None:
                fields[key] = (value,)
            elif key in several:
                several[key].append(value)
            else:
                several[key] = [*found, value]
    for key, found in several.items():
        fields[key] = tuple(found)
    return fields


def path_prefixes(path):
    """Return ``path`` and its prefixes that end before a dot.

    They are what :func:`flatten_body` must visit to find ``path``.
    """
    prefixes = []
    dot = path.find('.')
    while dot >= 0:
        prefixes.append(path[:dot])
        dot = path.find('.', dot + 1)
    prefixes.append(path)
    return prefixes


def read_tags(message):
    """Return a message's tags as a frozenset, or None (read leniently)."""
    try:
        return tags.parse_tags(message.get(TAGS), TAGS, None, strict=False)
    except InvalidPolicy:
        return None


def read_routing_key(message):
    """Return the words of a message's routing key, or None (leniently)."""
    try:
        return binding_key.parse_routing_key(
            message.get(ROUTING_KEY), ROUTING_KEY, None, strict=False)
    except InvalidPolicy:
        return None


def read_attributes(message, names=None):
    """Return a dict of attribute name -> tuple of typed values (leniently).

    :param names: if given, a container of the only names to read.
    """
    attributes = message.get(ATTRIBUTES)
    if not isinstance(attributes, dict):
        return {}
    fields = {}
    for name, value in attributes.items():
        if names is not None and name not in names:
            continue
        if type(value) is str and type(name) is str and name:
            fields[name] = ((v.STRING, value),)  # parse_attribute's, inlined
            continue
        try:
            found = parse_attribute(name, value)
        except InvalidPolicy:
            continue
        if found is not None:
            fields[name] = found
    return fields


class MessageView:
    """A message's filter fields, read leniently and computed on demand.

    :param message: the message (a dict).
    :param body_paths: if given, a container of the only body paths that
        will be asked for, with their :func:`path_prefixes`.
    """

    def __init__(self, message, body_paths=None):
        if not isinstance(message, dict):
            raise InvalidPolicy('message', 'message_type', 'must be a JSON '
                                'object, not %s' % v.describe(message))
        self.message = message
        self.body_paths = body_paths

    @functools.cached_property
    def tags(self):
        """The message's tags as a frozenset, or None."""
        return read_tags(self.message)

    @functools.cached_property
    def routing_key(self):
        """The words of the message's routing key, or None."""
        return read_routing_key(self.message)

    @functools.cached_property
    def attributes(self):
        """A dict of attribute name -> tuple of typed values."""
        return read_attributes(self.message)

    @functools.cached_property
    def body(self):
        """A dict of dotted body path -> tuple of typed values."""
        return flatten_body(self.message.get(BODY), self.body_paths)
