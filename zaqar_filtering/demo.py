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

"""Plays the Tencent CMQ tag and routing-key scenarios through the engine.

Run ``python -m zaqar_filtering.demo``. Every subscription and message goes
through :func:`validate_options` / :func:`validate_message` and a
:class:`Matcher`, exactly as the Zaqar stages use them.
"""

import collections

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import Matcher
from zaqar_filtering import validate_message
from zaqar_filtering import validate_options

#: CMQ scenario 1: subscribers and their tags.
TAG_SUBSCRIBERS = {
    'A': {'filter_policies': ['apple']},
    'B': {'filter_policies': ['xiaomi']},
    'C': {'filter_policies': ['imac', 'xiaomi']},
    'D': {},
}
#: The tags of each of the producer's 100 messages.
MESSAGE_TAGS = ['apple', 'imac', 'iphone', 'macbook']

#: CMQ routing-key matching examples.
KEY_SUBSCRIBERS = {
    'E': {'binding_keys': ['1.*.0']},
    'F': {'binding_keys': ['1.#.0']},
    'G': {'binding_keys': ['#']},
}
ROUTING_KEYS = ['1.x.0', '1.0', '1.2.3.4.4.2.2.0', '2.0']


def deliveries(subscribers, messages):
    """Return a Counter of subscriber -> messages received."""
    matcher = Matcher()
    for name, options in subscribers.items():
        matcher.add(name, validate_options(options))
    received = collections.Counter({name: 0 for name in subscribers})
    for message in messages:
        validate_message(message)
        received.update(matcher.match(message))
    return received


def tag_scenario():
    """CMQ scenario 1, then one untagged message: rows of the receipt table."""
    tagged = deliveries(TAG_SUBSCRIBERS,
                        [{'body': i, 'filter_policies': MESSAGE_TAGS}
                         for i in range(100)])
    untagged = deliveries(TAG_SUBSCRIBERS, [{'body': 'untagged'}])
    return [(name, '+'.join(options.get('filter_policies', [])) or '-',
             tagged[name], untagged[name])
            for name, options in TAG_SUBSCRIBERS.items()]


def routing_scenario():
    """Each binding key against each routing key: rows of a yes/no table."""
    rows = []
    for name, options in KEY_SUBSCRIBERS.items():
        matcher = Matcher()
        matcher.add(name, validate_options(options))
        rows.append((name, options['binding_keys'][0],
                     ['yes' if matcher.match({'routing_key': key}) else 'no'
                      for key in ROUTING_KEYS]))
    return rows


def table(header, rows):
    """Return rows as a plain-text table under a header."""
    widths = [max(len(str(cell)) for cell in column)
              for column in zip(header, *rows)]
    lines = [header, ['-' * width for width in widths]] + rows
    return '\n'.join('  '.join(str(cell).ljust(width)
                               for cell, width in zip(line, widths)).rstrip()
                     for line in lines)


def main():
    print('CMQ scenario 1: 100 messages tagged %s, then 1 untagged message\n'
          % ', '.join(MESSAGE_TAGS))
    print(table(['subscriber', 'tags', 'of 100 tagged', 'untagged'],
                [list(row) for row in tag_scenario()]))
    print('\nRouting keys (binding key * = one word, # = zero or more)\n')
    print(table(['subscriber', 'binding key'] + ROUTING_KEYS,
                [[name, key] + answers
                 for name, key, answers in routing_scenario()]))
    print('\nInvalid input is rejected with the option, value and rule:\n')
    for options in ({'filter_policies': ['abcdefghijklmnopq']},
                    {'binding_keys': ['1..0']},
                    {'filter_policy': {'price': [{'numeric': ['>', 'ten']}]}}):
        try:
            validate_options(options)
        except InvalidPolicy as exc:
            print('  %s' % exc)


if __name__ == '__main__':
    main()
