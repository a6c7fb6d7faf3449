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

"""Topic fan-out into queue subscribers beside webhook fan-out, one run.

Run from the repository root: ``.venv/bin/python bench/topics.py``.

One redis-server, one ``zaqar-filtering-server`` (the plugin's stages,
the redis delivery ledger) and one webhook receiver (a thread of this
process). Three topics of one project:

* ``one``: a single webhook subscriber (the post latency baseline);
* ``queues``: N ``queue:`` subscribers, one per target queue, all matching;
* ``hooks``: N webhook subscribers, all matching.

Subscriptions are written straight into redis (creating N through the API
costs O(N) each); the target queues are created through the API. The
first post to each topic is a warm-up (delivery process, matcher) and is
not counted. Then each topic gets ``--posts`` posts of one message; a post
is timed until its answer (latency), and the fan-out until the last
message landed (a target queue's message count, read in redis, or the
receiver's count of webhooks). Landed per second = deliveries / that time.

Goals (same-run ratios, so that the machine's speed cancels out):

* topic post latency with N queue subscribers <= 3 x with one webhook
  (a post records its deliveries and returns; it does not deliver);
* queue fan-out >= 0.5 x webhook fan-out in messages landed per second
  (posting into a queue goes through Zaqar's storage pipeline).
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import redis  # noqa: E402

from tests.functional import base  # noqa: E402
from zaqar_filtering import topic_store  # noqa: E402

PROJECT = 'bench'
OVERRIDES = {
    'storage': {'message_pipeline': 'zaqar_filtering.notifier',
                'subscription_pipeline': 'zaqar_filtering.validation'},
    'filtering:delivery': {'poll_seconds': '0.1'},
}
TIMEOUT = 300


def seed(redis_server, client, topic, subscribers):
    """Register a topic and write its subscriptions into redis."""
    client.hset(topic_store.REDIS_PREFIX + PROJECT, topic, '{}')
    redis_server.seed_subscriptions(PROJECT, topic_store.source_of(topic),
                                    [(s, {}) for s in subscribers])


def landed_in_queues(client, queues):
    with client.pipeline(transaction=False) as pipe:
        for queue in queues:
            pipe.zcard('%s.%s.messages' % (PROJECT, queue))
        return sum(pipe.execute())


def post(api, topic, n):
    started = time.monotonic()
    response = api.post('/v2/topics/%s/messages' % topic, json={
        'messages': [{'body': {'n': n}, 'ttl': 3600}]})
    if response.status_code != 201:
        raise RuntimeError('posting to %s: HTTP %d %s' % (
            topic, response.status_code, response.text))
    return started, time.monotonic() - started


def wait(count, landed, started):
    deadline = time.monotonic() + TIMEOUT
    while landed() < count:
        if time.monotonic() > deadline:
            raise RuntimeError('only %d of %d deliveries landed within %d s'
                               % (landed(), count, TIMEOUT))
        time.sleep(0.05)
    return time.monotonic() - started


def measure(api, topic, posts, expected_per_post, landed):
    """Warm up, then time ``posts`` posts: latencies and fan-out seconds."""
    started, _ = post(api, topic, -1)
    wait(expected_per_post, landed, started)
    latencies = []
    first = None
    for n in range(posts):
        started, latency = post(api, topic, n)
        first = first or started
        latencies.append(latency)
    seconds = wait(expected_per_post * (posts + 1), landed, first)
    return latencies, seconds


def run(args, workdir):
    redis_server = base.RedisServer(workdir).start()
    receiver = base.WebhookReceiver().start()
    port = base.free_port()
    conf = base.write_zaqar_conf(workdir, redis_server.uri, port, OVERRIDES)
    server = base.ZaqarServer(conf, port, os.path.join(workdir, 'zaqar.log'))
    client = redis.Redis(host=base.HOST, port=redis_server.port)
    api = base.Client('http://%s:%d' % (base.HOST, port), project=PROJECT)
    try:
        queues = ['target-%05d' % i for i in range(args.subscribers)]
        seed(redis_server, client, 'one', [receiver.url('one')])
        seed(redis_server, client, 'queues', ['queue:' + q for q in queues])
        seed(redis_server, client, 'hooks',
             [receiver.url('hooks/%d' % i) for i in range(args.subscribers)])
        server.start()
        for queue in queues:
            api.create_queue(queue)
        results = {
            'one webhook': measure(api, 'one', args.posts, 1,
                                   lambda: len(receiver.requests('one'))),
            '%d queues' % args.subscribers: measure(
                api, 'queues', args.posts, args.subscribers,
                lambda: landed_in_queues(client, queues)),
            '%d webhooks' % args.subscribers: measure(
                api, 'hooks', args.posts, args.subscribers,
                lambda: len(receiver.requests('hooks'))),
        }
    finally:
        api.close()
        client.close()
        server.stop()
        receiver.stop()
        redis_server.stop()
    return results


def report(args, results):
    print('Topic posts, %d timed per topic (one message each), after a '
          'warm-up; %d subscribers\n' % (args.posts, args.subscribers))
    print('| topic subscribers | post latency median (ms) | deliveries | '
          'fan-out (s) | landed/s |')
    print('|---|---|---|---|---|')
    rates = {}
    medians = {}
    for name, (latencies, seconds) in results.items():
        fanout = int(name.split()[0]) if name[0].isdigit() else 1
        count = fanout * args.posts
        medians[name] = statistics.median(latencies)
        rates[name] = count / seconds
        print('| %s | %.1f | %d | %.2f | %.0f |' % (
            name, medians[name] * 1000, count, seconds, rates[name]))
    queues = '%d queues' % args.subscribers
    hooks = '%d webhooks' % args.subscribers
    latency_ratio = medians[queues] / medians['one webhook']
    rate_ratio = rates[queues] / rates[hooks]
    print('\n| goal | ratio | verdict |')
    print('|---|---|---|')
    print('| post latency, %s / one webhook <= 3 | %.2f | %s |' % (
        queues, latency_ratio, 'MET' if latency_ratio <= 3 else 'NOT MET'))
    print('| landed/s, %s / %s >= 0.5 | %.2f | %s |' % (
        queues, hooks, rate_ratio, 'MET' if rate_ratio >= 0.5 else 'NOT MET'))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--subscribers', type=int, default=1000)
    parser.add_argument('--posts', type=int, default=5)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix='zaqar-filtering-bench-topics-')
    try:
        results = run(args, workdir)
    except Exception as exc:
        print('The bench failed: %s (logs: %s)' % (exc, workdir),
              file=sys.stderr)
        return 2
    shutil.rmtree(workdir, ignore_errors=True)
    report(args, results)
    return 0


if __name__ == '__main__':
    sys.exit(main())
