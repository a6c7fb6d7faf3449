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

"""What the commands share: paths, JSON arguments, paged listings."""

import json
import urllib.parse

from osc_lib import exceptions


def path(*parts):
    """Return ``/v2/...`` of the parts, each quoted as one path segment."""
    return '/v2/' + '/'.join(urllib.parse.quote(str(part), safe='')
                             for part in parts)


def read_object(value, option, example):
    """Return the JSON object of an argument: JSON text, or ``@file``.

    :param option: the option's name, for the errors (``--message``).
    :param example: a JSON object like the expected one, for the errors.
    :raises osc_lib.exceptions.CommandError: when it is not a JSON object.
    """
    if value.startswith('@'):
        try:
            with open(value[1:], encoding='utf-8') as source:
                value = source.read()
        except OSError as exc:
            raise exceptions.CommandError('%s: cannot read %s: %s'
                                          % (option, value[1:], exc.strerror))
    try:
        document = json.loads(value)
    except ValueError as exc:
        raise exceptions.CommandError('%s: not JSON: %s' % (option, exc))
    if not isinstance(document, dict):
        raise exceptions.CommandError(
            '%s: must be a JSON object such as %s, not %s'
            % (option, example, type(document).__name__))
    return document


def read_message(value):
    """Return the message of ``--message``: JSON text, or ``@file``."""
    return read_object(value, '--message', '{"body": ...}')


def add_page_size(parser, items):
    """Add ``--page-size``: how many ``items`` a request reads."""
    parser.add_argument(
        '--page-size', metavar='<count>', type=int,
        help='%s per request (the server\'s default when not given); every '
             'page is read' % items)


def pages(client, method, first, items, page_size=None, **kwargs):
    """Yield the items of every page of a Zaqar listing, page by page.

    :param first: the path of the first page; the next ones are the
        ``next`` links of the answers.
    :param items: returns the items of a page (a list).
    :param page_size: items per request; the server's default when None.
    :param kwargs: passed to every request (``json=`` for a dry run).
    """
    path, params = first, {}
    if page_size is not None:
        params['limit'] = page_size
    while True:
        page = client.request(method, path, params=params, **kwargs)
        found = items(page)
        yield from found
        if not found or not page.get('links'):
            return
        path, params = page['links'][0]['href'], {}
