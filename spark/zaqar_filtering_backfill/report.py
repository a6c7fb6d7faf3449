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

"""The backfill report: summary.json, invalid/ lines and a printed table."""

import json
import os

from zaqar_filtering_backfill import transform

#: Counts printed in the summary table, in order.
TABLE_ROWS = ('total', 'with_policy', 'no_policy', 'valid', 'invalid',
              'expired', 'unreadable', 'upserted', 'unchanged')
#: Rows added to the table by --validate.
VALIDATE_ROWS = ('in_sync', 'missing', 'stale', 'orphaned')


def invalid_line(outcome):
    """Return the invalid/ JSON line of an INVALID or UNREADABLE outcome."""
    return json.dumps({key: outcome.get(key) for key in
                       ('project', 'queue', 'subscription_id', 'option',
                        'reason')}, sort_keys=True)


def write_summary(directory, summary):
    """Write ``directory``/summary.json (the directory is made if needed).

    :raises OSError: when the directory cannot be written.
    """
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, 'summary.json')
    with open(path + '.tmp', 'w') as out:
        json.dump(summary, out, indent=2, sort_keys=True)
        out.write('\n')
    os.replace(path + '.tmp', path)
    return path


def write_report(directory, summary, invalid_outcomes):
    """Write summary.json and invalid/part-00000.jsonl under ``directory``.

    :raises OSError: naming the directory when it cannot be written.
    """
    os.makedirs(os.path.join(directory, 'invalid'), exist_ok=True)
    with open(os.path.join(directory, 'summary.json'), 'w') as out:
        json.dump(summary, out, indent=2, sort_keys=True)
        out.write('\n')
    path = os.path.join(directory, 'invalid', 'part-00000.jsonl')
    with open(path, 'w') as out:
        for outcome in invalid_outcomes:
            if outcome['outcome'] in (transform.INVALID,
                                      transform.UNREADABLE):
                out.write(invalid_line(outcome) + '\n')


def format_table(summary):
    """Return the summary as a readable two-column table."""
    rows = [(name, summary.get(name, 0)) for name in TABLE_ROWS]
    if summary.get('mode') == 'validate':
        rows += [(name, summary.get(name, 0)) for name in VALIDATE_ROWS]
    rows += [('invalid: %s' % rule, count) for rule, count in
             sorted(summary.get('errors_by_rule', {}).items())]
    width = max(len(name) for name, _ in rows)
    return '\n'.join('%-*s %10d' % (width, name, count)
                     for name, count in rows)
