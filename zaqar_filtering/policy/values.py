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

"""Typed scalar values, as policies and messages compare them.

A value is a ``(kind, payload)`` tuple so that the string ``"1"``, the number
``1`` and ``true`` never compare equal (``Decimal(1) == True`` in Python).
Numbers are ``decimal.Decimal``, so ``300`` and ``300.0`` are equal and
``0.1`` is exactly one tenth.
"""

import decimal
import json
import math
import re

STRING = 's'
NUMBER = 'n'
BOOLEAN = 'b'
NULL = 'z'

_NUMBER_TEXT = re.compile(r'[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\Z')
_MAX_NUMBER_TEXT = 1024


def number_from_json(value):
    """Return the Decimal of a JSON number (int or finite float), or None."""
    if type(value) is int:
        return decimal.Decimal(value)
    if type(value) is float and math.isfinite(value):
        # repr is the shortest text that reads back as the same float, so
        # 0.1 becomes exactly 0.1 and not 0.1000000000000000055511151231.
        return decimal.Decimal(repr(value))
    return None


def number_from_text(text):
    """Return the Decimal of a numeric string like ``"-12.5e3"``, or None."""
    if len(text) > _MAX_NUMBER_TEXT or not _NUMBER_TEXT.match(text):
        return None
    return decimal.Decimal(text)


def from_json(value):
    """Return the typed value of a JSON scalar, or None for anything else."""
    kind = type(value)
    if kind is int or kind is float:  # not bool, whose type is bool
        number = number_from_json(value)
        return None if number is None else (NUMBER, number)
    if isinstance(value, str):
        return (STRING, value)
    if value is True or value is False:
        return (BOOLEAN, value)
    if value is None:
        return (NULL, None)
    number = number_from_json(value)
    if number is not None:
        return (NUMBER, number)
    return None


def describe(value):
    """Return a short readable form of a value for error messages.

    A string is shown in single quotes, anything else as JSON.
    """
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + '...')
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + '...'
