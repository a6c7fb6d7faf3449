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

"""Claim throughput of ordered queues against a plain queue, in one run.

Run from the repository root: ``.venv/bin/python bench/claims.py``.

One redis-server and one ``zaqar-filtering-server`` with the
``zaqar_filtering.ordering`` stage in its message and claim pipelines. For
each workload a fresh queue gets the same messages (1 KiB bodies, posted 10
per request, not timed); then 4 consumer threads, each with its own HTTP
connection, claim (``limit=10``, ttl 60 s) and delete each message they got
with its claim id (``DELETE .../messages/{id}?claim_id=...``, as a consumer
does; Zaqar 23's redis store answers 204 to a bulk ``?ids=`` delete of
claimed messages but deletes nothing) until the queue is empty; a claim
that gets nothing is followed by a 10 ms pause. The
figure is messages consumed per second, from the first claim to the last
delete, and its ratio to the plain queue's measured in the same run:

* ``plain``: a queue without ``_ordered_by_key``, messages with no key;
* ``ordered, K keys``: ``"_ordered_by_key": true``, message i carrying key
  ``i mod K``, for K = 1,000, 10 and 1. With one key only one message can
  be held at a time, so it measures the round trips of one consumer.

Each run also checks that every message was consumed once and, for the
ordered queues, in posting order per key.
"""

import argparse
import os
import platform
import shutil
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.functional import base  # noqa: E402

PROJECT = 'bench-claims'
CONSUMERS = 4
CLAIM_LIMIT = 10
BODY_BYTES = 1024
#: Seconds a consumer waits after a claim that got nothing.
EMPTY_CLAIM_PAUSE = 0.01
PIPELINES = {'storage': {
    'message_pipeline': 'zaqar_filtering.notifier, zaqar_filtering.ordering',
    'claim_pipeline': 'zaqar_filtering.ordering'}}
#: (workload, keys per queue or None, least ratio to plain): the goals.
WORKLOADS = (('plain', None, None), ('ordered, 1000 keys', 1000, 0.7),
             ('ordered, 10 keys', 10, 0.5), ('ordered, 1 key', 1, None))
#: Xiaomi EMQ's figure for one partition of a TopicQueue, 1 KiB messages.
EMQ_PARTITION_RATE = 500


def fill(client, queue, keys, count):
    metadata = {'_ordered_by_key': True} if keys else {}
    response = client.create_queue(queue, metadata)
    response.raise_for_status()
    pad = 'x' * (BODY_BYTES - 40)
    for start in range(0, count, 10):
        batch = []
        for seq in range(start, min(start + 10, count)):
            message = {'ttl': 3600, 'body': {'seq': seq, 'pad': pad}}
            if keys:
                message['ordering_key'] = 'key-%d' % (seq % keys)
            batch.append(message)
        client.post_messages(queue, batch).raise_for_status()


def consume(url, queue, count):
    """Return (seconds, the seqs consumed in consumption order)."""
    consumed = []
    lock = threading.Lock()
    failures = []

    def consumer():
        client = base.Client(url, project=PROJECT)
        try:
            while True:
                with lock:
                    if len(consumed) >= count:
                        return
                response = client.post('/v2/queues/%s/claims' % queue,
                                       params={'limit': CLAIM_LIMIT},
                                       json={'ttl': 60, 'grace': 60})
                if response.status_code == 204:
                    # Nothing claimable now: back off as consumers do.
                    time.sleep(EMPTY_CLAIM_PAUSE)
                    continue
                response.raise_for_status()
                messages = response.json()['messages']
                with lock:
                    consumed.extend(m['body']['seq'] for m in messages)
                claim_id = response.headers['Location'].rsplit('/', 1)[-1]
                for message in messages:
                    client.delete(message['href'], params={
                        'claim_id': claim_id}).raise_for_status()
        except Exception as exc:
            failures.append(exc)
        finally:
            client.close()

    threads = [threading.Thread(target=consumer) for _ in range(CONSUMERS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return time.monotonic() - started, consumed


def check(consumed, keys, count):
    """Return what is wrong with a run, or None."""
    if sorted(consumed) != list(range(count)):
        return 'not every message consumed exactly once'
    if keys:
        last = {}
        for seq in consumed:
            if last.get(seq % keys, -1) > seq:
                return 'key %d consumed out of order' % (seq % keys)
            last[seq % keys] = seq
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--messages', type=int, default=1000,
                        help='messages per workload (default 1000)')
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix='zaqar-filtering-bench-claims-')
    redis_server = server = None
    try:
        redis_server = base.RedisServer(workdir).start()
        port = base.free_port()
        conf = base.write_zaqar_conf(workdir, redis_server.uri, port,
                                     PIPELINES)
        server = base.ZaqarServer(conf, port,
                                  os.path.join(workdir, 'zaqar.log')).start()
        client = base.Client(server.url, project=PROJECT)
        print('claims: %d messages of %d bytes per workload, %d consumers, '
              'claim limit %d; %s, Python %s'
              % (args.messages, BODY_BYTES, CONSUMERS, CLAIM_LIMIT,
                 platform.machine(), platform.python_version()))
        print()
        print('%-20s %9s %10s %8s  %s' % ('workload', 'seconds', 'msg/s',
                                          'ratio', 'goal'))
        plain_rate = None
        all_met = True
        for index, (name, keys, least) in enumerate(WORKLOADS):
            queue = 'bench-%d' % index
            fill(client, queue, keys, args.messages)
            seconds, consumed = consume(server.url, queue, args.messages)
            problem = check(consumed, keys, args.messages)
            if problem:
                print('%s: %s' % (name, problem))
                return 1
            rate = args.messages / seconds
            plain_rate = plain_rate or rate
            ratio = rate / plain_rate
            if least is None:
                goal = ('-' if keys is None else
                        'EMQ partition ~%d msg/s (informative)'
                        % EMQ_PARTITION_RATE)
            else:
                met = ratio >= least
                all_met = all_met and met
                goal = '>= %.1f x plain: %s' % (least,
                                                'MET' if met else 'NOT MET')
            print('%-20s %9.2f %10.0f %7.2fx  %s' % (name, seconds, rate,
                                                     ratio, goal))
        client.close()
        return 0 if all_met else 1
    finally:
        if server is not None:
            server.stop()
        if redis_server is not None:
            redis_server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == '__main__':
    sys.exit(main())
