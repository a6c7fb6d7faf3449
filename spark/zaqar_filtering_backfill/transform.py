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


def from_mongo_row(row):
    """Return the subscription of a row of the MongoDB data source.

    :param row: ``(id, queue, subscriber, expires, options, project)`` as
        :func:`zaqar_filtering_backfill.mongo_source.subscription_row`
        makes it: ``expires`` ISO 8601 or None, ``options`` JSON or None.
    :raises ValueError: naming the missing field.
    """
    sub_id, queue, subscriber, expires, options, project = row
    doc = {'_id': sub_id, 'p': project,
           'o': json.loads(options) if options else {},
           'e': datetime.datetime.fromisoformat(expires) if expires else None}
    if queue is not None:
        doc['s'] = queue
    if subscriber is not None:
        doc['u'] = subscriber
    return from_mongo(doc)


def unreadable(exc, text=None):
    """Return the UNREADABLE outcome of an input that is no subscription."""
    reason = 'unreadable input: %s' % exc
    if text is not None:
        reason += ': %s' % text[:200]
    return {'outcome': UNREADABLE, 'project': None, 'queue': None,
            'subscription_id': None, 'option': None, 'reason': reason}


def count_key(outcome):
    """Return the key :func:`summary_from_counts` counts an outcome under."""
    rule = outcome.get('rule') if outcome['outcome'] == INVALID else None
    return outcome['outcome'], outcome.get('project'), rule


def summary_from_counts(counts, upserted=0, unchanged=0):
    """Return the report counts from counts by :func:`count_key`.

    :param counts: iterable of ``((outcome, project, rule), count)``.
    """
    outcomes = collections.Counter()
    rules = collections.Counter()
    projects = collections.defaultdict(collections.Counter)
    for (outcome, project, rule), count in counts:
        outcomes[outcome] += count
        projects[str(project)][outcome] += count
        if outcome == INVALID:
            rules[rule] += count
    total = sum(outcomes.values())
    return {'total': total,
            'with_policy': outcomes[VALID] + outcomes[INVALID],
            'no_policy': outcomes[NO_POLICY], 'valid': outcomes[VALID],
            'invalid': outcomes[INVALID], 'expired': outcomes[EXPIRED],
            'unreadable': outcomes[UNREADABLE],
            'upserted': upserted, 'unchanged': unchanged,
            'errors_by_rule': dict(sorted(rules.items())),
            'projects': {p: dict(sorted(c.items()))
                         for p, c in sorted(projects.items())}}


def summarize(outcomes, upserted=0, unchanged=0):
    """Return the report counts of an iterable of outcomes."""
    counts = collections.Counter(count_key(out) for out in outcomes)
    return summary_from_counts(counts.items(), upserted, unchanged)


#: Problems --validate reports, per policy.
MISSING = 'missing'
STALE = 'stale'
ORPHANED = 'orphaned'


def fingerprint(record):
    """Return what --validate compares of a record.

    That is its hash, subscriber and expiry (ISO 8601 or None).
    """
    expires = record.expires
    return (record.hash, record.subscriber,
            expires.isoformat() if expires is not None else None)


def drift(wanted, stored):
    """Return MISSING, STALE, ORPHANED or None (in sync) for one key.

    :param wanted: the fingerprint of the subscription's valid policy, or
        None when no valid unexpired subscription has that key.
    :param stored: the fingerprint of the store's record, or None.
    """
    if wanted is None:
        return ORPHANED if stored is not None else None
    if stored is None:
        return MISSING
    if wanted[:2] != stored[:2]:
        return STALE
    if wanted[2] is None or stored[2] is None:
        return None if wanted[2] == stored[2] else STALE
    delta = (datetime.datetime.fromisoformat(wanted[2])
             - datetime.datetime.fromisoformat(stored[2]))
    return None if abs(delta.total_seconds()) <= 1 else STALE
