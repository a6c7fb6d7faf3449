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

"""Backfill the policy store from Zaqar's existing subscriptions.

::

    spark-submit --py-files zaqar_filtering_backfill.zip \\
        spark/backfill_policies.py --source SOURCE --report DIR \\
        [--store URI] [--dry-run | --validate]
    python spark/backfill_policies.py ...      # runs on local[*]

SOURCE is a MongoDB URI of Zaqar's subscriptions database
(``mongodb://host/zaqar_subscriptions``) or a JSON Lines file (or
directory) written by ``zaqar-filtering-export``.

Exit status: 0 done (with ``--validate``: store in sync); 2 wrong
arguments; 3 ``--validate`` found missing, stale or orphaned policies;
1 the job failed.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from zaqar_filtering_backfill import job  # noqa: E402

#: Exit status of --validate when the store and the subscriptions differ.
EXIT_DRIFT = 3
EXIT_USAGE = 2


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog='backfill_policies.py',
        description='Validate every existing Zaqar subscription with the '
                    'filtering rules of the API and upsert the valid '
                    'policies into the policy store; write a report.',
        epilog='Exit status: 0 done (--validate: in sync), 1 the job '
               'failed, 2 wrong arguments, 3 --validate found missing, '
               'stale or orphaned policies.')
    parser.add_argument('--source', required=True,
                        help='MongoDB URI of Zaqar\'s subscriptions database '
                             '(mongodb://host/zaqar_subscriptions) or a '
                             'JSON Lines file from zaqar-filtering-export')
    parser.add_argument('--report', required=True, metavar='DIR',
                        help='directory for summary.json and invalid/')
    parser.add_argument('--store', metavar='URI',
                        help='MongoDB URI of the policy store (its database '
                             'in the path, default zaqar_filtering); '
                             'required unless --dry-run')
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument('--dry-run', action='store_true',
                      help='validate and write the report only')
    mode.add_argument('--validate', action='store_true',
                      help='compare the store with the subscriptions '
                           '(missing, stale, orphaned policies) without '
                           'writing; exit 3 when they differ')
    parser.add_argument('--master',
                        help='Spark master when run with python (default '
                             'local[*]); spark-submit sets its own')
    parser.add_argument('--partition-size', type=int, metavar='N',
                        help='MongoDB source: documents per partition '
                             '(default 100000)')
    args = parser.parse_args(argv)
    if not args.dry_run and not args.store:
        parser.error('--store is required unless --dry-run '
                     '(--validate compares with it)')
    if args.store and not job.is_mongodb_uri(args.store):
        parser.error('--store must be a mongodb:// or mongodb+srv:// URI, '
                     'not %r' % args.store)
    if (not job.is_mongodb_uri(args.source) and '://' not in args.source
            and not os.path.exists(args.source)):
        parser.error('--source: no such file or directory: %s'
                     % args.source)
    if os.path.exists(args.report) and not os.path.isdir(args.report):
        parser.error('--report: %s exists and is not a directory'
                     % args.report)
    if args.partition_size is not None and args.partition_size < 1:
        parser.error('--partition-size must be at least 1')
    return args


def spark_session(master=None):
    """Return the SparkSession: spark-submit's, or local[*] under python."""
    from pyspark.sql import SparkSession

    under_submit = 'PYSPARK_GATEWAY_PORT' in os.environ
    if not under_submit:
        # The Python workers must see zaqar_filtering: use this Python.
        os.environ.setdefault('PYSPARK_PYTHON', sys.executable)
    builder = (SparkSession.builder.appName('zaqar-filtering-backfill')
               .config('spark.ui.showConsoleProgress', 'true')
               .config('spark.log.level', 'WARN'))
    if master or not under_submit:
        builder = builder.master(master or 'local[*]')
    return builder.getOrCreate()


def run(args, spark, target=None, out=None, progress=None):
    """Run the job for parsed arguments on a session; return the status.

    :param target: the policy store target (default: ``--store``'s).
    :param progress: callable(message) for the stage lines (default:
        to stderr).
    """
    from pyspark import errors

    out = out or sys.stdout
    if target is None and args.store:
        target = job.MongoTarget(args.store)
    try:
        summary = job.run(spark, args.source, args.report, target,
                          dry_run=args.dry_run, validate=args.validate,
                          partition_size=args.partition_size,
                          progress=progress)
    except (ValueError, OSError) as exc:
        sys.stderr.write('backfill_policies.py: error: %s\n' % exc)
        return 1
    except errors.PySparkException as exc:
        # A task failed (the store or the source unreachable, ...): the
        # executor's traceback is in Spark's log above.
        sys.stderr.write('backfill_policies.py: the Spark job failed: %s\n'
                         % str(exc).strip().splitlines()[0])
        return 1
    job.print_table(summary, out)
    if args.validate and (summary['missing'] or summary['stale']
                          or summary['orphaned']):
        sys.stderr.write('the policy store differs from the subscriptions: '
                         'see %s\n' % os.path.join(args.report, 'drift'))
        return EXIT_DRIFT
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    spark = spark_session(args.master)
    try:
        return run(args, spark)
    finally:
        spark.stop()


if __name__ == '__main__':
    sys.exit(main())
