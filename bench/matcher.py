#!/usr/bin/env python3
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

"""Benchmark of zaqar_filtering.Matcher against a naive per-subscription loop.

For each policy kind (tags, binding keys, SNS attributes, SNS body, and a
mixed queue) it builds queues of 10 ... 100,000 subscriptions in which every
message is delivered to exactly the same small number of subscriptions
(MATCHES, 10), whatever the queue size, and times ``Matcher.match`` and a
naive baseline on the same messages.

Naive baseline: every subscription's options are parsed once up front with
``parse_options``; for each message one ``MessageView`` is built and every
parsed policy's ``matches(view)`` is evaluated in a loop.

The ``values`` kind is issue 15's shared-values workload: subscription i
has ``{"event": ["type<i % 1000>"], "price": [{"numeric": [">", i % 100]}]}``,
so n / 1000 subscriptions share each exact value, and a message reaches all
of them (``price`` above their bound). Its goal allows 1 us per match.

The goals of issue 15 (goal 4) are printed at the end with MET / NOT MET:
``Matcher.match`` within an absolute budget per kind at every size, and
at least 1,000x faster than LocalStack's SNS filter-policy evaluator on the
``values`` workload at 10,000 subscriptions in the same run. LocalStack is
an optional peer: its ``localstack/services/sns/filter.py`` is taken from an
installed ``localstack`` package, else from the path in the environment
variable ``LOCALSTACK_SNS_FILTER`` (a checkout, an unpacked package, the
file itself, or a ``localstack-core`` wheel); without it the peer column is
skipped and the reason printed.

Run from the repository root::

    python bench/matcher.py            # full run: 10 .. 100,000 subscriptions
    python bench/matcher.py --quick    # smoke run: 10, 100, 1,000
    python bench/matcher.py --sizes 10,100,5000

See bench/README.md for what is measured and the results on the reference
machine.
"""

import argparse
import builtins
import datetime
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
import types
import zipfile

try:
    import zaqar_filtering  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))

from zaqar_filtering import Matcher  # noqa: E402
from zaqar_filtering.policy.message import MessageView  # noqa: E402
from zaqar_filtering.policy.subscription import parse_options  # noqa: E402

SEED = 20261122
MATCHES = 10            # subscriptions every message is delivered to
MESSAGES = 50           # distinct messages, cycled through
FULL_SIZES = (10, 100, 1000, 10000, 100000)
QUICK_SIZES = (10, 100, 1000)
UNFILTERED = 2          # subscriptions without policy in the mixed queue
CHURN = 2000            # subscriptions removed / re-added at the largest size


# --------------------------------------------------------------------------
# Workloads. Subscriptions come in groups; every member of group g accepts
# the messages built for group g and no other message, by construction.
# Groups share one structure (same attribute names, same binding-key shapes,
# same kind of tags) and differ only in their values.
# --------------------------------------------------------------------------

def tags_options(g, k, j):
    # One tag of the group plus 0-4 tags of its own that no message carries.
    return {'filter_policies': ['t%d' % g] +
            ['u%d.%d' % (j, x) for x in range(k % 5)]}


def tags_message(g, i):
    # The group's tag plus 0-4 tags no subscription has.
    return {'filter_policies': ['t%d' % g] +
            ['m%d.%d' % (i, x) for x in range(i % 5)]}


def binding_options(g, k, j):
    matching = ['order.*.g%d.created' % g,
                'order.#.g%d.#' % g,
                '*.*.g%d.*' % g,
                '#.g%d.created' % g,
                'order.*.g%d.#' % g]
    # Keys with wildcards that never match a message of the benchmark.
    others = ['order.*.g%d.deleted' % g,
              'audit.g%d.#' % g,
              'order.*.*.g%d' % g,
              '*.s%d.#' % j]
    keys = [matching[k % 5]] + others[:k % 4]
    if k % 2:
        keys.append(matching[(k + 2) % 5])
    return {'binding_keys': keys}


def binding_message(g, i):
    return {'routing_key': 'order.r%d.g%d.created' % (i, g)}


def attributes_options(g, k, j):
    lo, hi = g * 10, g * 10 + 10
    store, category = 's%d' % g, 'c%d/' % g
    variant = k % 4
    if variant == 0:
        policy = {'store': [store],
                  'price': [{'numeric': ['>=', lo, '<', hi]}],
                  'category': [{'prefix': category}]}
    elif variant == 1:
        # No exact value: a numeric range or a prefix drives the lookup.
        policy = {'price': [{'numeric': ['>=', lo, '<', hi]}],
                  'category': [{'prefix': category}],
                  'status': [{'anything-but': ['cancelled']}]}
    elif variant == 2:
        policy = {'category': [{'prefix': category}],
                  'store': [store, 'x%d' % j]}
    else:
        policy = {'store': [store],
                  'price': [{'numeric': ['>', lo - 1, '<=', hi - 1]}],
                  'region': [{'prefix': 'r'}]}
    return {'filter_policy': policy,
            'filter_policy_scope': 'MessageAttributes'}


def attributes_message(g, i):
    return {'attributes': {
        'store': 's%d' % g,
        'price': {'Type': 'Number', 'Value': '%.2f' % (g * 10 + 0.25 + i % 9)},
        'category': 'c%d/shoes/%d' % (g, i),
        'status': 'paid',
        'region': {'Type': 'String', 'Value': 'r%d' % (i % 7)},
        'labels': ['new', 'l%d' % i]}}


def body_options(g, k, j):
    lo, hi = g * 100, g * 100 + 100
    tier, source = 'tier%d' % g, 'web%d-' % g
    variant = k % 3
    if variant == 0:
        policy = {'order': {'customer': {'tier': [tier]},
                            'total': [{'numeric': ['>', lo, '<=', hi]}]},
                  'source': [{'prefix': source}]}
    elif variant == 1:
        policy = {'order': {'total': [{'numeric': ['>', lo, '<=', hi]}],
                            'shipping': {'country': [
                                {'anything-but': ['XX']}]}},
                  'source': [{'prefix': source}]}
    else:
        policy = {'order': {'customer': {'tier': [tier, 'vip%d' % j],
                                         'id': [{'exists': True}]}},
                  'source': [{'prefix': source}]}
    return {'filter_policy': policy, 'filter_policy_scope': 'MessageBody'}


def body_message(g, i):
    return {'body': {
        'order': {'id': 'o%d' % i,
                  'customer': {'tier': 'tier%d' % g, 'id': i},
                  'total': g * 100 + 10.5 + i % 50,
                  'shipping': {'country': 'DE', 'city': 'c%d' % i},
                  'items': [{'sku': 'sku%d' % i, 'qty': 1},
                            {'sku': 'sku%d' % (i + 1), 'qty': 2}]},
        'source': 'web%d-checkout' % g,
        'note': 'n%d' % i}}


def _merge(*dicts):
    merged = {}
    for d in dicts:
        merged.update(d)
    return merged


# Group members of the mixed queue: one kind, or two kinds ANDed.
_MIXED_MEMBERS = (
    lambda g, k, j: tags_options(g, k, j),
    lambda g, k, j: binding_options(g, k, j),
    lambda g, k, j: attributes_options(g, k, j),
    lambda g, k, j: body_options(g, k, j),
    lambda g, k, j: _merge(tags_options(g, k, j), binding_options(g, k, j)),
    lambda g, k, j: attributes_options(g, k, j),
    lambda g, k, j: _merge(body_options(g, k, j), tags_options(g, k, j)),
    lambda g, k, j: binding_options(g, k, j),
)


def mixed_options(g, k, j):
    return _MIXED_MEMBERS[k](g, k, j)


def mixed_message(g, i):
    return _merge(tags_message(g, i), binding_message(g, i),
                  attributes_message(g, i), body_message(g, i))


def shared_options(g, k, j):
    # Stress case, not part of the default run: every subscription first
    # lists a value that every message carries (a common "status"), then
    # the selective one.
    return {'filter_policy': {'status': ['paid'], 'store': ['s%d' % g],
                              'price': [{'numeric': ['>=', g * 10,
                                                     '<', g * 10 + 10]}]},
            'filter_policy_scope': 'MessageAttributes'}


VALUE_TYPES = 1000      # distinct "event" values of the values workload


def values_options(i):
    return {'filter_policy': {'event': ['type%d' % (i % VALUE_TYPES)],
                              'price': [{'numeric': ['>', i % 100]}]}}


def values_message(event, price):
    return {'attributes': {'event': 'type%d' % event,
                           'price': {'Type': 'Number',
                                     'Value': '%.1f' % price}}}


def build_values_workload(n):
    """Issue 15's shared-values workload: see the module docstring.

    Every message carries the event of n / 1000 subscriptions (one below
    1,000) and a price above their common bound, so it reaches all of them.
    """
    rng = random.Random('%d-values-%d' % (SEED, n))
    subs = [('%024x' % i, values_options(i)) for i in range(n)]
    rng.shuffle(subs)
    messages, expected = [], []
    for _ in range(MESSAGES):
        event = rng.randrange(min(n, VALUE_TYPES))
        messages.append(values_message(event, event % 100 + 0.5))
        expected.append(frozenset('%024x' % i
                                  for i in range(event, n, VALUE_TYPES)))
    return subs, messages, expected


# name -> (title, options(g, k, j), message(g, i), unfiltered subscriptions)
KINDS = {
    'tags': ('tags (filter_policies)', tags_options, tags_message, 0),
    'binding': ('binding keys (RabbitMQ topic)', binding_options,
                binding_message, 0),
    'attributes': ('SNS filter policy, MessageAttributes scope '
                   '(exact + numeric range + prefix)',
                   attributes_options, attributes_message, 0),
    'body': ('SNS filter policy, MessageBody scope (nested keys)',
             body_options, body_message, 0),
    'mixed': ('mixed queue (all kinds, some ANDed, %d without policy)'
              % UNFILTERED, mixed_options, mixed_message, UNFILTERED),
    'shared': ('SNS attributes whose first key holds a '
               'value every message carries', shared_options,
               attributes_message, 0),
    'values': ('SNS attributes, shared values (n / 1000 subscriptions per '
               'exact value, then a numeric bound)', None, None, 0),
}
DEFAULT_KINDS = ('tags', 'binding', 'attributes', 'body', 'mixed', 'shared',
                 'values')

# Issue 15, goal 4: the largest median Matcher.match at any size, in us.
BUDGETS = {'tags': 5.0, 'binding': 15.0, 'attributes': 30.0, 'body': 30.0}
VALUES_BUDGET = (30.0, 1.0)   # us, plus us per match, at 100,000
PEER_SIZE = 10000             # LocalStack is compared at this size
PEER_GOAL = 1000.0            # times faster than LocalStack
LOCALSTACK_ENV = 'LOCALSTACK_SNS_FILTER'
LOCALSTACK_FILE = 'localstack/services/sns/filter.py'


def build_workload(kind, n):
    """Return (subscriptions, messages, expected) for a queue of n.

    subscriptions: list of (sub_id, options) in random order;
    messages: MESSAGES messages; expected[i]: the ids message i must reach.
    """
    if kind == 'values':
        return build_values_workload(n)
    _, options_of, message_of, unfiltered = KINDS[kind]
    rng = random.Random('%d-%s-%d' % (SEED, kind, n))
    per_group = MATCHES - unfiltered
    filtered = n - unfiltered
    if filtered < per_group:
        raise SystemExit('size %d is too small for %s' % (n, kind))
    groups = filtered // per_group
    ids = set()

    def new_id():
        while True:
            sub_id = '%024x' % rng.getrandbits(96)  # like a Mongo ObjectId
            if sub_id not in ids:
                ids.add(sub_id)
                return sub_id

    subs, members = [], {}
    for _ in range(unfiltered):
        subs.append((new_id(), {}))
    always = {sub_id for sub_id, _ in subs}
    for j in range(filtered):
        # Filler subscriptions (filtered % per_group) fall in group
        # `groups`, which no message targets.
        g, k = divmod(j, per_group)
        sub_id = new_id()
        subs.append((sub_id, options_of(g, k, j)))
        members.setdefault(g, set()).add(sub_id)
    rng.shuffle(subs)
    if groups >= MESSAGES:
        targets = rng.sample(range(groups), MESSAGES)
    else:
        targets = [i % groups for i in range(MESSAGES)]
    messages = [message_of(g, i) for i, g in enumerate(targets)]
    expected = [frozenset(members[g] | always) for g in targets]
    assert all(len(e) == MATCHES for e in expected)
    return subs, messages, expected


# --------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------

def naive_match(policies, message):
    view = MessageView(message)
    return {sub_id for sub_id, policy in policies if policy.matches(view)}


def load_localstack():
    """Return (LocalStack's SubscriptionFilter, where from) or (None, why).

    Only ``filter.py`` is needed: when it is read from a path, its one
    import from the rest of LocalStack (an exception class that evaluation
    never raises) is given a stand-in.
    """
    try:
        from localstack.services.sns.filter import SubscriptionFilter
        return SubscriptionFilter, 'installed localstack package'
    except ImportError as exc:
        installed = 'no importable localstack package (%s)' % exc
    path = os.environ.get(LOCALSTACK_ENV)
    if not path:
        return None, ('%s, and %s is not set (see bench/README.md)'
                      % (installed, LOCALSTACK_ENV))
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as wheel:
                source = wheel.read(LOCALSTACK_FILE).decode('utf-8')
        else:
            if os.path.isdir(path):
                candidates = [os.path.join(path, LOCALSTACK_FILE),
                              os.path.join(path, 'localstack-core',
                                           LOCALSTACK_FILE)]
                path = next((c for c in candidates if os.path.exists(c)),
                            candidates[0])
            with open(path, encoding='utf-8') as source_file:
                source = source_file.read()
    except (OSError, KeyError) as exc:
        return None, '%s=%s: cannot read %s: %s' % (
            LOCALSTACK_ENV, os.environ[LOCALSTACK_ENV], LOCALSTACK_FILE, exc)
    stand_in = types.SimpleNamespace(
        InvalidParameterException=type('InvalidParameterException',
                                       (Exception,), {}))

    def import_(name, *args, **kwargs):
        if name == 'localstack.aws.api.sns':
            return stand_in
        return builtins.__import__(name, *args, **kwargs)

    namespace = {'__name__': 'localstack_sns_filter',
                 '__builtins__': dict(vars(builtins), __import__=import_)}
    try:
        exec(compile(source, path, 'exec'), namespace)
        return namespace['SubscriptionFilter'], path
    except Exception as exc:
        return None, '%s: %s: %s' % (path, type(exc).__name__, exc)


def sns_attributes(message):
    """The message's attributes as SNS hands them to LocalStack."""
    converted = {}
    for name, value in message['attributes'].items():
        if isinstance(value, dict):
            converted[name] = {'DataType': value['Type'],
                               'StringValue': value['Value']}
        else:
            converted[name] = {'DataType': 'String', 'StringValue': value}
    return converted


def time_localstack(peer_class, state, args):
    """Time LocalStack's evaluator over every subscription of a queue.

    That is how LocalStack publishes: each subscription's filter policy is
    checked on the message, one subscription after the other.
    """
    peer = peer_class()
    policies = [(sub_id, options['filter_policy'])
                for sub_id, options in state['subs']]
    check = peer.check_filter_policy_on_message_attributes

    def localstack(attributes):
        return {sub_id for sub_id, policy in policies
                if check(policy, attributes)}

    messages = [sns_attributes(m) for m in state['messages']]
    warm = time_calls(localstack, messages, state['expected'], 2,
                      'LocalStack warm-up')
    calls = budget_calls(statistics.median(warm) / 1e9, args.naive_budget,
                         args.naive_min_calls, args.naive_calls)
    return time_calls(localstack, messages, state['expected'], calls,
                      'LocalStack n=%d' % state['n'])


def time_calls(func, messages, expected, calls, label):
    """Call func(message) `calls` times, cycling the messages.

    Returns the per-call times in ns. Every result is checked against
    expected, outside the timed region.
    """
    clock = time.perf_counter_ns
    times = []
    count = len(messages)
    for c in range(calls):
        i = c % count
        message = messages[i]
        t0 = clock()
        result = func(message)
        t1 = clock()
        times.append(t1 - t0)
        if result != expected[i]:
            raise AssertionError(
                '%s: message %d reached %d subscriptions, expected %d '
                '(missing %d, extra %d)'
                % (label, i, len(result), len(expected[i]),
                   len(expected[i] - result), len(result - expected[i])))
    return times


def median_us(times):
    return statistics.median(times) / 1000.0


def pct_us(times, q):
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000.0


def build_state(kind, n):
    """Build one queue: the Matcher (each add timed) and the naive list."""
    subs, messages, expected = build_workload(kind, n)
    clock = time.perf_counter_ns
    gc.collect()
    matcher = Matcher()
    add_times = []
    for sub_id, options in subs:
        t0 = clock()
        matcher.add(sub_id, options)
        add_times.append(clock() - t0)
    assert len(matcher) == n
    # Naive baseline: parse every subscription once up front.
    policies = [(sub_id, parse_options(options)) for sub_id, options in subs]
    # Correctness on every message before timing anything.
    for i, message in enumerate(messages):
        found = matcher.match(message)
        if found != expected[i]:
            raise AssertionError('%s n=%d: Matcher gave %d matches for '
                                 'message %d, expected %d'
                                 % (kind, n, len(found), i,
                                    len(expected[i])))
    return {'n': n, 'subs': subs, 'messages': messages,
            'expected': expected, 'matcher': matcher, 'policies': policies,
            'add_times': add_times}


def budget_calls(estimate_s, budget_s, low, high):
    return max(low, min(high, int(budget_s / max(estimate_s, 1e-9))))


def bench_kind(kind, args, progress):
    """Time one policy kind at every size; return the table rows."""
    states = []
    for n in args.sizes:
        states.append(build_state(kind, n))
        progress('%s n=%s built' % (kind, '{:,}'.format(n)))
    # Keep the collector from walking the large, long-lived indexes in the
    # middle of a timed call.
    gc.collect()
    gc.freeze()
    try:
        rows = []
        for state in states:
            n, messages, expected = (state['n'], state['messages'],
                                     state['expected'])
            policies = state['policies']

            def naive(message, policies=policies):
                return naive_match(policies, message)

            # Warm up, and estimate the cost to size the number of calls.
            warm = time_calls(naive, messages, expected,
                              max(1, min(MESSAGES, int(2e8 // (n * 2000)))),
                              'naive warm-up')
            if n <= 100:
                calls = args.naive_calls
            else:
                calls = budget_calls(statistics.median(warm) / 1e9,
                                     args.naive_budget, args.naive_min_calls,
                                     args.naive_calls)
            state['naive_times'] = time_calls(
                naive, messages, expected, calls, '%s n=%d naive' % (kind, n))
            progress('%s n=%s naive timed' % (kind, '{:,}'.format(n)))
            if kind == 'values' and n == PEER_SIZE and args.peer[0]:
                state['peer_times'] = time_localstack(args.peer[0], state,
                                                      args)
                progress('%s n=%s LocalStack timed'
                         % (kind, '{:,}'.format(n)))

        # Matcher: the sizes are timed in interleaved rounds, so that load
        # from other processes on the machine hits every size alike.
        for state in states:
            warm = time_calls(state['matcher'].match, state['messages'],
                              state['expected'], MESSAGES, 'Matcher warm-up')
            total = budget_calls(statistics.median(warm) / 1e9,
                                 args.matcher_budget, args.naive_min_calls,
                                 args.matcher_calls)
            state['matcher_per_round'] = max(1, total // args.rounds)
            state['matcher_times'] = []
        for round_number in range(args.rounds):
            for state in states:
                # Start each round at a different message.
                count = state['matcher_per_round']
                offset = round_number * count % MESSAGES
                messages = state['messages'][offset:] + \
                    state['messages'][:offset]
                expected = state['expected'][offset:] + \
                    state['expected'][:offset]
                state['matcher_times'] += time_calls(
                    state['matcher'].match, messages, expected, count,
                    '%s n=%d Matcher' % (kind, state['n']))
        progress('%s Matcher timed' % kind)

        # Remove then re-add a random sample of the largest queue.
        state = states[-1]
        clock = time.perf_counter_ns
        matcher, n = state['matcher'], state['n']
        rng = random.Random('%d-%s-%d-churn' % (SEED, kind, n))
        sample = rng.sample(state['subs'], min(CHURN, n))
        remove_times, readd_times = [], []
        for sub_id, _ in sample:
            t0 = clock()
            matcher.remove(sub_id)
            remove_times.append(clock() - t0)
        assert len(matcher) == n - len(sample)
        for sub_id, options in sample:
            t0 = clock()
            matcher.add(sub_id, options)
            readd_times.append(clock() - t0)
        assert len(matcher) == n
        for i, message in enumerate(state['messages']):
            assert matcher.match(message) == state['expected'][i]
        add_times = state['add_times']
        churn = {'build_mean': statistics.mean(add_times) / 1000.0,
                 'build_median': median_us(add_times),
                 'add_median': median_us(readd_times),
                 'remove_median': median_us(remove_times),
                 'remove_mean': statistics.mean(remove_times) / 1000.0,
                 'sample': len(sample)}
        for state in states:
            m_times, n_times = state['matcher_times'], state['naive_times']
            rows.append({
                'n': state['n'],
                'matches': len(state['expected'][0]),
                'matcher_us': median_us(m_times),
                'matcher_p90_us': pct_us(m_times, 0.9),
                'matcher_calls': len(m_times),
                'naive_us': median_us(n_times),
                'naive_calls': len(n_times),
            })
            if 'peer_times' in state:
                rows[-1]['localstack_us'] = median_us(state['peer_times'])
                rows[-1]['localstack_calls'] = len(state['peer_times'])
        rows[-1]['churn'] = churn
        return rows
    finally:
        states.clear()
        gc.unfreeze()
        gc.collect()


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------

def fmt_us(value):
    if value >= 10000:
        return '{:,.0f}'.format(value)
    if value >= 100:
        return '{:,.1f}'.format(value)
    return '{:.2f}'.format(value)


def print_table(rows):
    base = next((r for r in rows if r['n'] == 100), None)
    header = ('subscriptions', 'matches/msg', 'Matcher µs (median)',
              'Matcher p90 µs', 'naive µs (median)', 'naive/Matcher',
              'Matcher vs @100', 'calls Matcher/naive')
    lines = []
    for r in rows:
        rel = ('%.2fx' % (r['matcher_us'] / base['matcher_us'])
               if base else 'n/a')
        lines.append(('{:,}'.format(r['n']), str(r['matches']),
                      fmt_us(r['matcher_us']), fmt_us(r['matcher_p90_us']),
                      fmt_us(r['naive_us']),
                      '{:,.1f}x'.format(r['naive_us'] / r['matcher_us']),
                      rel, '%d/%d' % (r['matcher_calls'], r['naive_calls'])))
    widths = [max(len(h), *(len(line[c]) for line in lines))
              for c, h in enumerate(header)]
    print('| ' + ' | '.join(h.ljust(w) for h, w in zip(header, widths))
          + ' |')
    print('|' + '|'.join('-' * (w + 1) + ':' for w in widths) + '|')
    for line in lines:
        print('| ' + ' | '.join(cell.rjust(w)
                                for cell, w in zip(line, widths)) + ' |')


def verdict(rows, kind):
    base = next((r for r in rows if r['n'] == 100), None)
    top = rows[-1]
    growth = top['matcher_us'] / base['matcher_us'] if base else None
    speedup = top['naive_us'] / top['matcher_us']
    label = '{}k'.format(top['n'] // 1000) if top['n'] >= 1000 else str(
        top['n'])
    if top['n'] < 100000:
        # The goals are stated for 100,000 subscriptions.
        ok_growth = ok_speed = 'n/a below 100k'
    elif kind == 'values':
        # Matches grow with the size: its own goal is in goal_lines().
        ok_growth = 'n/a: matches grow with the size'
        ok_speed = _met(speedup >= 100.0)
    else:
        ok_growth = ('MET' if growth is not None and growth <= 2.0
                     else 'NOT MET')
        ok_speed = 'MET' if speedup >= 100.0 else 'NOT MET'
    text = ('%s vs 100: %s (goal <= 2x) %s; Matcher vs naive at %s: %s '
            '(goal >= 100x) %s'
            % (label, '%.2fx' % growth if growth is not None else 'n/a',
               ok_growth, label, '{:,.0f}x'.format(speedup), ok_speed))
    return text


def _met(ok):
    return 'MET' if ok else 'NOT MET'


def goal_lines(results, peer_why):
    """Issue 15, goal 4, as budget ratios of this run; one line each."""
    lines = []
    for kind, budget in BUDGETS.items():
        rows = results.get(kind)
        if not rows:
            lines.append('%-11s not run' % (kind + ':'))
            continue
        worst = max(rows, key=lambda r: r['matcher_us'])
        lines.append('%-11s slowest median %s us (at %s subscriptions) vs '
                     'the %s us budget at every size: %.2f of budget %s'
                     % (kind + ':', fmt_us(worst['matcher_us']),
                        '{:,}'.format(worst['n']), fmt_us(budget),
                        worst['matcher_us'] / budget,
                        _met(worst['matcher_us'] <= budget)))
    rows = {r['n']: r for r in results.get('values', ())}
    top = rows.get(100000)
    if top is None:
        lines.append('values:     not run at 100,000 subscriptions')
    else:
        base, per_match = VALUES_BUDGET
        budget = base + per_match * top['matches']
        lines.append('values:     median %s us at 100,000 subscriptions, %d '
                     'matches vs the %s + %s x %d = %s us budget: %.2f of '
                     'budget %s'
                     % (fmt_us(top['matcher_us']), top['matches'],
                        fmt_us(base), fmt_us(per_match), top['matches'],
                        fmt_us(budget), top['matcher_us'] / budget,
                        _met(top['matcher_us'] <= budget)))
    peer = rows.get(PEER_SIZE)
    label = 'LocalStack:'
    if peer is None:
        lines.append('%-11s skipped: the values kind did not run at %s '
                     'subscriptions' % (label, '{:,}'.format(PEER_SIZE)))
    elif 'localstack_us' not in peer:
        lines.append('%-11s peer column skipped: %s' % (label, peer_why))
    else:
        ratio = peer['localstack_us'] / peer['matcher_us']
        lines.append('%-11s its evaluator %s us vs Matcher %s us at %s '
                     'subscriptions (values): %sx faster (goal >= %sx) %s'
                     % (label, fmt_us(peer['localstack_us']),
                        fmt_us(peer['matcher_us']), '{:,}'.format(PEER_SIZE),
                        '{:,.0f}'.format(ratio), '{:,.0f}'.format(PEER_GOAL),
                        _met(ratio >= PEER_GOAL)))
    return lines


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--quick', action='store_true',
                        help='smoke run: sizes 10,100,1000, fewer calls')
    parser.add_argument('--sizes', help='comma-separated queue sizes, '
                        'e.g. 10,100,1000 (default 10..100000)')
    parser.add_argument('--kinds', help='comma-separated kinds among %s '
                        '(default: %s)'
                        % (','.join(KINDS), ','.join(DEFAULT_KINDS)))
    parser.add_argument('--json', metavar='FILE',
                        help='also write the raw results as JSON')
    args = parser.parse_args(argv)
    if args.sizes:
        args.sizes = sorted({int(s.replace('_', '').replace(',', ''))
                             for s in args.sizes.split(',') if s.strip()})
    else:
        args.sizes = list(QUICK_SIZES if args.quick else FULL_SIZES)
    args.kinds = ([k.strip() for k in args.kinds.split(',')]
                  if args.kinds else list(DEFAULT_KINDS))
    for kind in args.kinds:
        if kind not in KINDS:
            parser.error('unknown kind %r' % kind)
    if args.quick:
        args.matcher_calls, args.naive_calls, args.rounds = 500, 500, 2
        args.naive_budget, args.matcher_budget = 0.3, 0.3
        args.naive_min_calls = 10
    else:
        args.matcher_calls, args.naive_calls, args.rounds = 5000, 2000, 5
        args.naive_budget, args.matcher_budget = 3.0, 5.0
        args.naive_min_calls = 20
    return args


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    print('zaqar_filtering Matcher benchmark%s' % (' (quick)' if args.quick
                                                   else ''))
    print('Python %s (%s) on %s; %d CPUs; %s'
          % (platform.python_version(), platform.python_implementation(),
             platform.platform(), os.cpu_count() or 0,
             datetime.datetime.now().strftime('%Y-%m-%d %H:%M')))
    print('seed %d; %d distinct messages cycled; every message reaches '
          'exactly %d subscriptions at every size' % (SEED, MESSAGES,
                                                      MATCHES))
    print('per-call times with time.perf_counter_ns; medians in µs')
    print('Matcher calls are timed in %d interleaved rounds over the sizes'
          % args.rounds)
    args.peer = load_localstack() if 'values' in args.kinds else (None, '')
    print('LocalStack peer: %s' % (args.peer[1] if args.peer[0]
                                   else 'skipped: ' + args.peer[1]))
    sys.stdout.flush()

    def progress(text):
        print('  ... %s (%.0f s elapsed)'
              % (text, time.perf_counter() - started),
              file=sys.stderr, flush=True)

    results = {}
    for kind in args.kinds:
        title = KINDS[kind][0]
        rows = bench_kind(kind, args, progress)
        print()
        print('## %s' % title)
        print()
        counts = {r['matches'] for r in rows}
        assert kind == 'values' or counts == {MATCHES}, counts
        print_table(rows)
        for row in rows:
            if 'localstack_us' in row:
                print()
                print('LocalStack\'s evaluator over the {:,} subscriptions: '
                      '{} µs (median of {}); Matcher {:,.0f}x faster'
                      .format(row['n'], fmt_us(row['localstack_us']),
                              row['localstack_calls'],
                              row['localstack_us'] / row['matcher_us']))
        churn = rows[-1]['churn']
        print()
        print('add/remove at {:,} subscriptions: add {} µs/add (mean over '
              'the build from empty; median {}); add into the full queue '
              '{} µs (median of {:,}); remove {} µs (median of {:,}; mean {})'
              .format(rows[-1]['n'], fmt_us(churn['build_mean']),
                      fmt_us(churn['build_median']),
                      fmt_us(churn['add_median']), churn['sample'],
                      fmt_us(churn['remove_median']), churn['sample'],
                      fmt_us(churn['remove_mean'])))
        results[kind] = rows
        sys.stdout.flush()
    print()
    print('## Verdict')
    print()
    for kind, rows in results.items():
        print('%-12s %s' % (kind + ':', verdict(rows, kind)))
    print()
    print('## Goals (issue 15, goal 4; absolute budgets, so compare with the '
          'tags row of the same run when the machine is loaded)')
    print()
    for line in goal_lines(results, args.peer[1]):
        print(line)
    print()
    print('total time %.0f s' % (time.perf_counter() - started))
    sys.stdout.flush()
    if args.json:
        with open(args.json, 'w') as out:
            json.dump({'python': platform.python_version(),
                       'platform': platform.platform(),
                       'cpus': os.cpu_count(), 'results': results},
                      out, indent=1)


if __name__ == '__main__':
    main()
