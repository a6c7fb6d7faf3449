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

"""The Spark pipeline of the backfill job.

One pass over the subscriptions, partition by partition
(:func:`classify_partition`): every subscription is classified with
:func:`zaqar_filtering_backfill.transform.classify` (the API's validation),
the valid policies of the partition are written to the policy store in
bulk (``MongoStore.write``, which skips unchanged records), and one small
row per subscription comes out. Counts are aggregated with
``reduceByKey`` (only the per-(outcome, project, rule) totals reach the
driver) and the invalid lines are written by Spark into ``DIR/invalid``.

``--validate`` classifies the same way without writing, reads the store's
records through the MongoDB data source, and full-outer-joins the two by
(project, queue, subscription_id): a valid subscription without a record
is *missing*, one whose record differs is *stale*, an unexpired record
without a valid subscription is *orphaned*.
"""

import atexit
import datetime
import functools
import operator
import os
import shutil
import sys
import tempfile
import time
import zipfile

from zaqar_filtering_backfill import mongo_source
from zaqar_filtering_backfill import report
from zaqar_filtering_backfill import transform

#: Valid records written to the store per bulk write.
BATCH_SIZE = 1000
#: Kind of the one row per partition that carries the store's counts.
STORE_COUNTS = '_store'
MONGODB_SCHEMES = ('mongodb://', 'mongodb+srv://')
INVALID_COLUMNS = ('project', 'queue', 'subscription_id', 'option', 'reason')
INVALID_SCHEMA = ', '.join('%s string' % name for name in INVALID_COLUMNS)
DRIFT_SCHEMA = ('project string, queue string, subscription_id string, '
                'problem string')


def is_mongodb_uri(source):
    return source.startswith(MONGODB_SCHEMES)


class MongoTarget:
    """The policy store at a MongoDB URI (``--store``).

    Picklable: executors call :meth:`open`, each for its own client.
    """

    def __init__(self, uri):
        self.uri = uri

    def open(self):
        from zaqar_filtering.store.mongodb import MongoStore
        return MongoStore.for_uri(self.uri)

    def records(self, spark, min_partitions):
        """Return an RDD of the store's records as policy rows."""
        store = self.open()
        try:
            database = store._policies.database.name
            collection = store._policies.name
        finally:
            store.close()
        frame = (spark.read.format(mongo_source.NAME)
                 .option('uri', self.uri)
                 .option('kind', mongo_source.POLICIES)
                 .option('database', database)
                 .option('collection', collection)
                 .option('minPartitions', str(min_partitions))
                 .load())
        return frame.rdd.map(tuple)


def ship_package(spark):
    """Make this package importable on the executors.

    Zips ``zaqar_filtering_backfill`` (wherever it was imported from) and
    adds it with ``SparkContext.addPyFile``; under ``spark-submit
    --py-files`` it is already there and adding it again is harmless.
    ``zaqar_filtering`` itself must be installed on every executor.
    """
    package_dir = os.path.dirname(os.path.abspath(__file__))
    if not os.path.isdir(package_dir):
        return None   # imported from a zip already shipped
    path = os.path.join(tempfile.mkdtemp(prefix='zaqar-filtering-backfill-'),
                        'zaqar_filtering_backfill.zip')
    with zipfile.ZipFile(path, 'w') as archive:
        for name in sorted(os.listdir(package_dir)):
            if name.endswith('.py'):
                archive.write(os.path.join(package_dir, name),
                              'zaqar_filtering_backfill/' + name)
    spark.sparkContext.addPyFile(path)
    atexit.register(shutil.rmtree, os.path.dirname(path), True)
    return path


def _parse_line(line, now, snapshot=None):
    return transform.from_json_line(line, snapshot or now)


def _parse_row(row, now):
    return transform.from_mongo_row(tuple(row))


def classify_partition(items, parse, now, target=None, keep_records=False,
                       batch_size=BATCH_SIZE):
    """Classify one partition's subscriptions; write its valid policies.

    :param items: the partition's input (JSON lines or data source rows).
    :param parse: callable(item, now) returning a subscription dict or
        raising ValueError.
    :param target: where to write valid records (an object with
        ``open()`` returning a PolicyStore), or None for a dry run.
    :param keep_records: put each valid record's (key, fingerprint) in
        its row, for --validate.
    :returns: an iterator of ``(outcome, project, rule, payload)``:
        ``payload`` is the invalid line's fields for INVALID and
        UNREADABLE, the record's key and fingerprint for VALID with
        ``keep_records``, else None; then one ``(STORE_COUNTS, None, None,
        (upserted, unchanged))`` row.
    """
    store = target.open() if target is not None else None
    upserted = unchanged = 0
    pending = []

    def flush():
        nonlocal upserted, unchanged
        if pending:
            result = store.write(pending)
            upserted += result.written
            unchanged += result.unchanged
            del pending[:]

    try:
        for item in items:
            if isinstance(item, str) and not item.strip():
                continue
            try:
                outcome = transform.classify(parse(item, now), now)
            except (ValueError, TypeError, KeyError) as exc:
                outcome = transform.unreadable(
                    exc, item if isinstance(item, str) else repr(item))
            kind, project, rule = transform.count_key(outcome)
            payload = None
            if kind in (transform.INVALID, transform.UNREADABLE):
                payload = tuple(outcome.get(name)
                                for name in INVALID_COLUMNS)
            elif kind == transform.VALID:
                record = outcome['record']
                if keep_records:
                    payload = (record.key, transform.fingerprint(record))
                if store is not None:
                    pending.append(record)
                    if len(pending) >= batch_size:
                        flush()
            yield kind, project, rule, payload
        if store is not None:
            flush()
    finally:
        if store is not None:
            store.close()
    yield STORE_COUNTS, None, None, (upserted, unchanged)


def _count_pairs(row):
    kind, project, rule, payload = row
    if kind == STORE_COUNTS:
        return [((STORE_COUNTS, 'upserted', None), payload[0]),
                ((STORE_COUNTS, 'unchanged', None), payload[1])]
    return [((kind, project, rule), 1)]


def _is_invalid(row):
    return row[0] in (transform.INVALID, transform.UNREADABLE)


def _is_valid(row):
    return row[0] == transform.VALID


def _drift_row(pair):
    key, (wanted, stored) = pair
    problem = transform.drift(wanted, stored)
    return key + (problem,)


def _stored_pair(row, now):
    project, queue, sub_id, subscriber, digest, expires = row
    if expires and datetime.datetime.fromisoformat(expires) <= now:
        return []    # expired: not loaded, and removed by the TTL index
    return [((project, queue, sub_id), (digest, subscriber, expires))]


class Progress:
    """One line per stage on a stream (stderr by default)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.started = time.monotonic()

    def __call__(self, message):
        self.stream.write('[backfill %7.1fs] %s\n'
                          % (time.monotonic() - self.started, message))
        self.stream.flush()


def snapshot_time(source):
    """Return when a local JSON Lines export was taken, or None.

    An export's ``ttl`` is the time its subscription had left when the
    export was written, so it counts from the file's modification time
    (the newest file's, for a directory): two runs over one export give
    every subscription the same expiry, so the second changes nothing.
    """
    if '://' in source or not os.path.exists(source):
        return None
    paths = [source]
    if os.path.isdir(source):
        paths = [os.path.join(source, name) for name in os.listdir(source)]
    mtime = max(os.path.getmtime(path) for path in paths) if paths else None
    if mtime is None:
        return None
    return datetime.datetime.fromtimestamp(mtime, datetime.timezone.utc)


def load_source(spark, source, min_partitions, partition_size=None,
                data_source=None):
    """Return ``(rdd, parse)`` of a MongoDB URI or a JSON Lines path.

    :param data_source: the DataSource class for MongoDB URIs (default
        :class:`mongo_source.MongoDataSource`; tests give a subclass).
    """
    if is_mongodb_uri(source):
        data_source = data_source or mongo_source.MongoDataSource
        spark.dataSource.register(data_source)
        reader = (spark.read.format(data_source.name())
                  .option('uri', source)
                  .option('minPartitions', str(min_partitions)))
        if partition_size:
            reader = reader.option('partitionSize', str(partition_size))
        return reader.load().rdd, _parse_row
    if not os.path.exists(source) and '://' not in source:
        raise FileNotFoundError('no such file or directory: %s' % source)
    return (spark.sparkContext.textFile(source, min_partitions),
            functools.partial(_parse_line, snapshot=snapshot_time(source)))


def run(spark, source, report_dir, target=None, dry_run=False,
        validate=False, now=None, progress=None, partition_size=None,
        data_source=None):
    """Run the backfill (or --validate) and write the report.

    :param target: where valid policies go (:class:`MongoTarget` or an
        object with the same ``open()`` and ``records()``); required
        unless ``dry_run``.
    :returns: the summary dict (also written to summary.json).
    """
    import pyspark

    progress = progress or Progress()
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if target is None and not dry_run:
        raise ValueError('a policy store is needed unless dry_run')
    if validate and target is None:
        raise ValueError('validate needs a policy store')
    started = time.monotonic()
    sc = spark.sparkContext
    ship_package(spark)
    min_partitions = max(2, sc.defaultParallelism)
    rdd, parse = load_source(spark, source, min_partitions, partition_size,
                             data_source)
    write_to = None if (dry_run or validate) else target
    outcomes = rdd.mapPartitions(functools.partial(
        classify_partition, parse=parse, now=now, target=write_to,
        keep_records=validate))
    outcomes.persist(pyspark.StorageLevel.MEMORY_AND_DISK)
    mode = 'validate' if validate else ('dry-run' if dry_run else 'backfill')
    try:
        progress('%s of %s: reading and validating%s (%d partitions)'
                 % (mode, source,
                    ', writing to the policy store' if write_to else '',
                    outcomes.getNumPartitions()))
        sc.setJobDescription('zaqar-filtering backfill: classify and count')
        counts = dict(outcomes.flatMap(_count_pairs)
                      .reduceByKey(operator.add).collect())
        store_counts = {key[1]: counts.pop(key) for key in list(counts)
                        if key[0] == STORE_COUNTS}
        summary = transform.summary_from_counts(
            counts.items(), store_counts.get('upserted', 0),
            store_counts.get('unchanged', 0))
        progress('counted %d subscriptions: %d valid, %d invalid, '
                 '%d expired, %d without policy'
                 % (summary['total'], summary['valid'], summary['invalid'],
                    summary['expired'], summary['no_policy']))
        sc.setJobDescription('zaqar-filtering backfill: invalid lines')
        progress('writing the invalid subscriptions to %s'
                 % os.path.join(report_dir, 'invalid'))
        invalid = outcomes.filter(_is_invalid).map(operator.itemgetter(3))
        (spark.createDataFrame(invalid, INVALID_SCHEMA).repartition(1)
         .write.mode('overwrite').option('ignoreNullFields', False)
         .json(os.path.join(report_dir, 'invalid')))
        if validate:
            progress('reading the policy store and comparing')
            sc.setJobDescription('zaqar-filtering backfill: validate')
            summary.update(_validate(spark, outcomes, target, now,
                                     report_dir, min_partitions))
        elif '://' not in report_dir:
            # Not this run's: the drift/ of an earlier --validate.
            shutil.rmtree(os.path.join(report_dir, 'drift'),
                          ignore_errors=True)
    finally:
        outcomes.unpersist()
        sc.setJobDescription(None)
    summary.update({
        'mode': mode, 'dry_run': bool(dry_run), 'source': _safe(source),
        'store': _safe(target.uri) if hasattr(target, 'uri') else None,
        'started_at': now.isoformat(),
        'elapsed_seconds': round(time.monotonic() - started, 3)})
    report.write_summary(report_dir, summary)
    progress('report written to %s' % report_dir)
    return summary


def _validate(spark, outcomes, target, now, report_dir, min_partitions):
    wanted = outcomes.filter(_is_valid).map(operator.itemgetter(3))
    stored = target.records(spark, min_partitions).flatMap(
        functools.partial(_stored_pair, now=now))
    drift = wanted.fullOuterJoin(stored).map(_drift_row)
    drift.persist()
    try:
        counts = dict(drift.map(lambda row: (row[3], 1))
                      .reduceByKey(operator.add).collect())
        problems = drift.filter(lambda row: row[3] is not None)
        (spark.createDataFrame(problems, DRIFT_SCHEMA).repartition(1)
         .write.mode('overwrite').json(os.path.join(report_dir, 'drift')))
    finally:
        drift.unpersist()
    return {'in_sync': counts.get(None, 0),
            'missing': counts.get(transform.MISSING, 0),
            'stale': counts.get(transform.STALE, 0),
            'orphaned': counts.get(transform.ORPHANED, 0)}


def _safe(uri):
    """Return a URI without its password, for the report."""
    if '://' not in uri or '@' not in uri.split('://', 1)[1].split('/')[0]:
        return uri
    scheme, rest = uri.split('://', 1)
    userinfo, host = rest.split('@', 1)
    return '%s://%s:***@%s' % (scheme, userinfo.split(':')[0], host)


def print_table(summary, stream=None):
    (stream or sys.stdout).write(report.format_table(summary) + '\n')
