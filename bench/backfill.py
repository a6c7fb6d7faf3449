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

"""Benchmark of the backfill job: subscriptions per second on local[2].

For each size (100,000 and 1,000,000 by default) it writes that many
generated subscriptions as a JSON Lines export, runs the job
(``zaqar_filtering_backfill.job.run``, what ``spark/backfill_policies.py``
runs) as a dry run on ``local[2]``, and checks that every count of the
report is exactly what the generator made: the totals per outcome, per
error rule and per project, and the number of invalid lines.

Run from the repository root::

    python bench/backfill.py                       # 100,000 and 1,000,000
    python bench/backfill.py --sizes 20000         # a quick run
    python bench/backfill.py --store mongodb://127.0.0.1/bench  # and write

With ``--store`` each size runs twice against the store: the first run
upserts every valid policy, the second finds them all unchanged.

See bench/README.md for the results on the reference machine.
"""

import argparse
import collections
import datetime
import glob
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'spark'))
try:
    import zaqar_filtering  # noqa: F401
except ImportError:
    sys.path.insert(0, ROOT)

from zaqar_filtering_backfill import job  # noqa: E402
from zaqar_filtering_backfill import transform  # noqa: E402

SEED = 20261123
SIZES = (100000, 1000000)
PROJECTS = 100
QUEUES = 50

#: Options of the generated subscriptions, by outcome; each subscription
#: takes one at random (the ids and values vary).
VALID_OPTIONS = (
    lambda r: {'filter_policies': ['t%d' % r.randrange(1000),
                                   't%d' % r.randrange(1000)]},
    lambda r: {'binding_keys': ['order.*.g%d.created' % r.randrange(100),
                                'audit.#']},
    lambda r: {'filter_policy': {'store': ['s%d' % r.randrange(50)],
                                 'price': [{'numeric': ['>=', 10,
                                                        '<', 20]}]}},
    lambda r: {'filter_policy': {'order': {'tier': ['gold']}},
               'filter_policy_scope': 'MessageBody',
               'filter_policies': ['t%d' % r.randrange(1000)]},
)
INVALID_OPTIONS = (
    lambda r: {'filter_policies': ['x' * (17 + r.randrange(10))]},
    lambda r: {'binding_keys': ['order..g%d' % r.randrange(100)]},
    lambda r: {'filter_policy': {'price': [{'numeric': ['>']}]}},
    lambda r: {'filter_policy': json.dumps({'store': ['s1']})},
)
NO_POLICY_OPTIONS = (
    lambda r: {},
    lambda r: {'other': 'kept by Zaqar, ignored here'},
)
NOW = datetime.datetime.now(datetime.timezone.utc)
#: Share of each outcome, out of 20.
MIX = ((transform.VALID, 14), (transform.INVALID, 2),
       (transform.EXPIRED, 2), (transform.NO_POLICY, 2))


def _rule(options):
    sub = {'id': 'x', 'queue': 'q', 'subscriber': 'http://h/', 'project': 'p',
           'options': options, 'expires': None}
    return transform.classify(sub, NOW).get('rule')


def generate(path, size, seed=SEED):
    """Write ``size`` subscriptions to ``path``; return the expected counts.

    :returns: a Counter by (outcome, project, rule), the shape of
        :func:`transform.summary_from_counts`' input.
    """
    rng = random.Random(seed)
    outcomes = [kind for kind, share in MIX for _ in range(share)]
    expected = collections.Counter()
    with open(path, 'w') as out:
        for index in range(size):
            kind = outcomes[rng.randrange(len(outcomes))]
            project = 'project-%03d' % rng.randrange(PROJECTS)
            ttl = 3600 + rng.randrange(86400)
            rule = None
            if kind == transform.VALID:
                options = rng.choice(VALID_OPTIONS)(rng)
            elif kind == transform.INVALID:
                options = rng.choice(INVALID_OPTIONS)(rng)
                rule = _rule(options)
            elif kind == transform.EXPIRED:
                options = rng.choice(VALID_OPTIONS)(rng)
                ttl = -1 - rng.randrange(3600)
            else:
                options = rng.choice(NO_POLICY_OPTIONS)(rng)
            expected[kind, project, rule] += 1
            out.write(json.dumps({
                'id': '%024x' % rng.getrandbits(96),
                'source': 'queue-%02d' % rng.randrange(QUEUES),
                'subscriber': 'http://receiver.example/%d' % index,
                'ttl': ttl, 'options': options, 'project': project}) + '\n')
    return expected


def check(summary, expected, report_dir):
    """Return the differences between the report and the generator."""
    want = transform.summary_from_counts(expected.items())
    problems = []
    for name in ('total', 'with_policy', 'no_policy', 'valid', 'invalid',
                 'expired', 'unreadable', 'errors_by_rule', 'projects'):
        if summary[name] != want[name]:
            problems.append('%s: report %r, generated %r'
                            % (name, summary[name], want[name]))
    lines = 0
    for part in glob.glob(os.path.join(report_dir, 'invalid', '*.json')):
        with open(part) as f:
            lines += sum(1 for _ in f)
    if lines != want['invalid']:
        problems.append('invalid/ has %d lines, generated %d invalid'
                        % (lines, want['invalid']))
    return problems


def spark_session(master):
    os.environ.setdefault('PYSPARK_PYTHON', sys.executable)
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master(master)
            .appName('zaqar-filtering-backfill-bench')
            .config('spark.ui.enabled', 'false')
            .config('spark.ui.showConsoleProgress', 'false')
            .config('spark.log.level', 'ERROR')
            .config('spark.driver.memory', '2g')
            .getOrCreate())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--sizes', default=','.join(map(str, SIZES)),
                        help='comma-separated subscription counts')
    parser.add_argument('--master', default='local[2]')
    parser.add_argument('--store', metavar='URI',
                        help='also write to this MongoDB policy store, '
                             'twice (upsert, then unchanged)')
    parser.add_argument('--keep', action='store_true',
                        help='keep the generated files and reports')
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(',')]
    workdir = tempfile.mkdtemp(prefix='zaqar-filtering-bench-backfill-')
    spark = spark_session(args.master)
    rows = []
    failed = False
    try:
        print('zaqar-filtering backfill benchmark')
        print('Python %s on %s; %d CPUs; Spark %s, master %s; %s'
              % (platform.python_version(), platform.platform(),
                 os.cpu_count(), spark.version, args.master,
                 time.strftime('%Y-%m-%d %H:%M')))
        # One small run first, so the first size does not pay Spark's
        # start-up (JVM warm-up, Python workers).
        warm = os.path.join(workdir, 'warm.jsonl')
        generate(warm, 1000, seed=1)
        job.run(spark, warm, os.path.join(workdir, 'warm-report'),
                dry_run=True, progress=lambda message: None)
        for size in sizes:
            source = os.path.join(workdir, 'subs-%d.jsonl' % size)
            started = time.monotonic()
            expected = generate(source, size)
            sys.stderr.write('generated %d subscriptions (%.1f MB) in %.1f s\n'
                             % (size, os.path.getsize(source) / 1e6,
                                time.monotonic() - started))
            runs = [('dry-run', None)]
            if args.store:
                target = job.MongoTarget(args.store)
                runs += [('upsert', target), ('again', target)]
            for name, target in runs:
                report_dir = os.path.join(workdir, 'report-%d-%s'
                                          % (size, name))
                started = time.monotonic()
                summary = job.run(spark, source, report_dir, target,
                                  dry_run=target is None)
                elapsed = time.monotonic() - started
                problems = check(summary, expected, report_dir)
                failed = failed or bool(problems)
                rows.append((size, name, elapsed, summary, problems))
                for problem in problems:
                    sys.stderr.write('COUNT MISMATCH: %s\n' % problem)
    finally:
        spark.stop()
        if args.keep:
            sys.stderr.write('kept %s\n' % workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print()
    print('| subscriptions | run | elapsed s | subscriptions/s | valid | '
          'invalid | expired | no policy | upserted | unchanged | counts |')
    print('|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|')
    for size, name, elapsed, summary, problems in rows:
        print('| {:,} | {} | {:.1f} | {:,.0f} | {:,} | {:,} | {:,} | {:,} | '
              '{:,} | {:,} | {} |'.format(
                  size, name, elapsed, size / elapsed, summary['valid'],
                  summary['invalid'], summary['expired'],
                  summary['no_policy'], summary['upserted'],
                  summary['unchanged'],
                  'exact' if not problems else 'MISMATCH'))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
