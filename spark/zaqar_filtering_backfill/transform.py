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

"""Pure transforms of the backfill job: one subscription in, one outcome out.

Nothing here imports pyspark, so the functions are tested without Spark
and run unchanged on executors.
"""

import collections
import datetime
import json

from zaqar_filtering.policy import errors
from zaqar_filtering.policy import subscription as sub_options
from zaqar_filtering.store import record as store_record

VALID = 'valid'
INVALID = 'invalid'
EXPIRED = 'expired'
NO_POLICY = 'no_policy'
#: Outcome of an input line that is not a subscription at all.
UNREADABLE = 'unreadable'


def from_mongo(doc):
    """Return the subscription of a Zaqar MongoDB document, or raise.

    :param doc: ``{_id, s, u, t, e, o, p, c}`` as Zaqar stores it.
    :raises ValueError: naming the missing field.
    """
    for field in ('_id', 's', 'u'):
        if field not in doc:
            raise ValueError('subscription document has no %r field'
                             % field)
    expires = doc.get('e')
    if expires is not None and expires.tzinfo is None:
        expires = expires.replace(tzinfo=datetime.timezone.utc)
    return {'id': str(doc['_id']), 'queue': doc['s'],
            'subscriber': doc['u'], 'options': doc.get('o') or {},
            'project': doc.get('p'), 'expires': expires}


def from_json_line(line, now):
    """Return the subscription of one JSON Lines export line, or raise.

    ``ttl`` counts from ``now`` (the export is a snapshot); a line may
    carry ``expires`` (ISO 8601) instead.

    :raises ValueError: naming the line's fault.
    """
    try:
        item = json.loads(line)
    except ValueError as exc:
        raise ValueError('not valid JSON: %s' % exc)
    if not isinstance(item, dict):
        raise ValueError('not a JSON object')
    for field in ('id', 'source', 'subscriber'):
        if field not in item:
            raise ValueError('no %r field' % field)
    expires = None
    if item.get('expires'):
        expires = datetime.datetime.fromisoformat(item['expires'])
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=datetime.timezone.utc)
    elif item.get('ttl') is not None:
        expires = now + datetime.timedelta(seconds=int(item['ttl']))
    return {'id': str(item['id']), 'queue': item['source'],
            'subscriber': item['subscriber'],
            'options': item.get('options') or {},
            'project': item.get('project'), 'expires': expires}


def classify(sub, now):
    """Return the outcome of one subscription as a dict.

    ``outcome`` is one of VALID, INVALID, EXPIRED, NO_POLICY; a valid
    one carries its ``record`` (a PolicyRecord), an invalid one its
    ``option``, ``rule`` and ``reason``.
    """
    base = {'project': sub['project'], 'queue': sub['queue'],
            'subscription_id': sub['id']}
    if sub['expires'] is not None and sub['expires'] <= now:
        return dict(base, outcome=EXPIRED)
    options = sub['options']
    if isinstance(options, dict) and not any(
            options.get(key) for key in sub_options.OPTIONS):
        return dict(base, outcome=NO_POLICY)
    try:
        rec = store_record.build_record(
            sub['project'], sub['queue'], sub['id'], sub['subscriber'],
            options, sub['expires'])
    except errors.InvalidPolicy as exc:
        return dict(base, outcome=INVALID, option=exc.location,
                    rule=exc.rule, reason=str(exc))
    return dict(base, outcome=VALID, record=rec)


def summarize(outcomes):
    """Return the report counts of an iterable of outcomes."""
    counts = collections.Counter()
    rules = collections.Counter()
    projects = collections.defaultdict(collections.Counter)
    for out in outcomes:
        counts[out['outcome']] += 1
        projects[str(out.get('project'))][out['outcome']] += 1
        if out['outcome'] == INVALID:
            rules[out['rule']] += 1
    total = sum(counts.values())
    return {'total': total,
            'with_policy': counts[VALID] + counts[INVALID],
            'no_policy': counts[NO_POLICY], 'valid': counts[VALID],
            'invalid': counts[INVALID], 'expired': counts[EXPIRED],
            'unreadable': counts[UNREADABLE],
            'errors_by_rule': dict(rules),
            'projects': {p: dict(c) for p, c in sorted(projects.items())}}
