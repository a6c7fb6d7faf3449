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

"""The filtering notifier versus Zaqar's stock notifier, in real servers.

Run from the repository root: ``.venv/bin/python bench/notifier.py``.

Two sides run side by side and share nothing but the machine. Each has its
own redis-server, its own webhook receiver process and its own
``zaqar-filtering-server``: the ``stock`` side with ``[storage]
message_pipeline = zaqar.notification.notifier``, the ``plugin`` side with
the plugin's notifier and validation stages. Subscriptions are written
straight into redis (creating them through the API costs O(n) each), into
queues that no post has touched yet, so no matcher is cached for them.

Each measured post is one request with one message whose body is a unique
token; the receiver records the arrival time (``time.monotonic``, which is
system-wide on Linux) of every webhook, grouped by token and by path
prefix, and the bench asks it over HTTP. A post is timed from just before
the request is sent: the post latency until its answer, the delivery time
until the last expected webhook arrived. The first post to each queue is a
warm-up (it starts the plugin's delivery process and builds the queue's
matcher) and is not counted. After each post the bench waits, with a
timeout, for every expected webhook plus a short grace, and checks that no
unexpected one came.

(a) 10, 1,000 and 5,000 subscriptions that all match the message.
(b) a queue of 10 subscriptions that all match versus a queue of 10,000 of
    which the same 10 match.
(c) plugin only: in that queue of 10,000, a post right after each of a
    create, two updates and a delete of a subscription, made through a
    second zaqar-filtering-server sharing the first one's redis, versus
    warm posts.

Goals (issue 15), each a ratio within this run: (1) the post at 5,000
matching subscriptions at most 2x the post at 10; (2) the post right after
a change at most 2x a warm post, delivered exactly as the change says; (3)
the last of 5,000 webhooks at least 8x sooner than with the stock notifier.
"""

import argparse
import asyncio
import collections
import datetime
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import requests  # noqa: E402

from tests.functional import base  # noqa: E402

PROJECT = 'bench'
STOCK = {'storage': {'message_pipeline': 'zaqar.notification.notifier'}}
PLUGIN = {'storage': {
    'message_pipeline': 'zaqar_filtering.notifier',
    'subscription_pipeline': 'zaqar_filtering.validation'}}
HIT_TAGS = ['hot']
SUB_TTL = 3600

#: Seconds to wait for the answer to one post (the stock notifier lists
#: every subscription before it answers: about 7 s at 5,000).
POST_TIMEOUT = 120
#: Seconds to wait for the webhooks of one post: a base plus this much per
#: expected webhook.
WAIT_BASE = 20
WAIT_PER_WEBHOOK = 0.006
#: Seconds after the last expected webhook in which no other may arrive.
GRACE = 0.3
POLL = 0.02


# The receiver: a separate process, asyncio, HTTP/1.1 keep-alive.

class _Records:
    """Arrivals by message token, then by path prefix."""

    def __init__(self):
        # token -> prefix -> [count, first, last, {path: count}]
        self._by_token = collections.defaultdict(dict)

    def add(self, path, body, when):
        try:
            document = json.loads(body)
            token = document.get('body')
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str):
            token = ''
        prefix = path.rsplit('/', 1)[0]
        entry = self._by_token[token].get(prefix)
        if entry is None:
            entry = self._by_token[token][prefix] = [0, when, when, {}]
        entry[0] += 1
        entry[2] = max(entry[2], when)
        entry[3][path] = entry[3].get(path, 0) + 1

    def query(self, token):
        return {prefix: {'count': count, 'first': first, 'last': last,
                         'paths': len(paths),
                         'most_per_path': max(paths.values())}
                for prefix, (count, first, last, paths)
                in self._by_token.get(token, {}).items()}


class _ReceiverProtocol(asyncio.Protocol):
    """One connection: answers every request at once with an empty 200.

    ``POST``/``PUT``: a webhook, recorded. ``GET /_stats/<token>``: the
    records of a token as JSON. ``GET /_ping``: readiness.
    """

    def __init__(self, records):
        self._records = records
        self._buffer = b''
        self._transport = None

    def connection_made(self, transport):
        self._transport = transport

    def data_received(self, data):
        when = time.monotonic()
        self._buffer += data
        while self._transport is not None:
            end = self._buffer.find(b'\r\n\r\n')
            if end < 0:
                return
            lines = self._buffer[:end].decode('latin-1').split('\r\n')
            method, target = lines[0].split(' ')[:2]
            length = 0
            close = False
            for line in lines[1:]:
                name, _, value = line.partition(':')
                name = name.strip().lower()
                if name == 'content-length':
                    length = int(value)
                elif name == 'connection':
                    close = value.strip().lower() == 'close'
            if len(self._buffer) < end + 4 + length:
                return
            body = self._buffer[end + 4:end + 4 + length]
            self._buffer = self._buffer[end + 4 + length:]
            if method == 'GET':
                if target.startswith('/_stats/'):
                    payload = json.dumps(self._records.query(
                        target[len('/_stats/'):])).encode()
                else:
                    payload = b'{}'
            else:
                self._records.add(target, body, when)
                payload = b''
            self._transport.write(
                b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n'
                b'Content-Length: %d\r\n\r\n%s' % (len(payload), payload))
            if close:
                self._transport.close()
                self._transport = None

    def connection_lost(self, exc):
        self._transport = None


def serve_receiver(port):
    """Main function of the receiver process; runs until SIGTERM."""
    records = _Records()

    async def run():
        loop = asyncio.get_running_loop()
        stop = loop.create_future()
        loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
        server = await loop.create_server(
            lambda: _ReceiverProtocol(records), base.HOST, port,
            backlog=4096)
        async with server:
            await stop

    asyncio.run(run())


class Receiver(base.Process):
    """The receiver process, and the bench's view of its records."""

    def __init__(self, workdir, name):
        self.port = base.free_port()
        super().__init__(
            '%s webhook receiver' % name,
            [sys.executable, os.path.abspath(__file__), '--receiver',
             str(self.port)],
            os.path.join(workdir, 'receiver.log'))
        self._session = requests.Session()

    def url(self, path):
        return 'http://%s:%d/%s' % (base.HOST, self.port, path.lstrip('/'))

    def ping(self):
        try:
            return self._session.get(self.url('_ping'), timeout=2).ok
        except requests.RequestException:
            return False

    def start(self):
        super().start()
        self.wait_until(self.ping)
        return self

    def stop(self, timeout=base.STOP_TIMEOUT):
        self._session.close()
        super().stop(timeout)

    def stats(self, token):
        response = self._session.get(self.url('_stats/' + token), timeout=10)
        response.raise_for_status()
        return response.json()

    def wait(self, token, expected, timeout):
        """Wait until each prefix has its expected count; return the stats.

        :returns: ``(stats, complete)``; ``complete`` is False when the
            timeout ran out first.
        """
        deadline = time.monotonic() + timeout
        while True:
            stats = self.stats(token)
            if all(stats.get(prefix, {}).get('count', 0) >= count
                   for prefix, count in expected.items()):
                return stats, True
            if time.monotonic() > deadline:
                return stats, False
            time.sleep(POLL)


# The servers.

class Side:
    """One redis-server, one receiver, one zaqar-filtering-server."""

    def __init__(self, name, pipelines, workdir):
        self.name = name
        self.pipelines = pipelines
        self.workdir = os.path.join(workdir, name)
        os.mkdir(self.workdir)
        self.redis = None
        self.receiver = None
        self.server = None
        self.client = None
        self.changer = None
        self.changer_client = None

    def start(self, changer=False):
        """Start; with ``changer``, a second server to change through."""
        self.redis = base.RedisServer(self.workdir).start()
        self.receiver = Receiver(self.workdir, self.name).start()
        self.server, self.client = self._server('zaqar')
        if changer:
            self.changer, self.changer_client = self._server('changer')

    def _server(self, name):
        port = base.free_port()
        conf = base.write_zaqar_conf(self.workdir, self.redis.uri, port,
                                     self.pipelines, name=name + '.conf')
        server = base.ZaqarServer(
            conf, port, os.path.join(self.workdir, name + '.log'),
            name='%s %s zaqar-filtering-server' % (self.name, name))
        server.start()
        return server, base.Client(server.url, project=PROJECT,
                                   timeout=POST_TIMEOUT)

    def stop(self):
        for client in (self.client, self.changer_client):
            if client is not None:
                client.close()
        for process in (self.changer, self.server, self.receiver,
                        self.redis):
            if process is not None:
                process.stop()

    def pids(self):
        return [p.pid for p in (self.redis, self.receiver, self.server,
                                self.changer) if p is not None]

    def create_queue(self, queue, hits, misses):
        """Create a queue and seed its subscriptions straight into redis.

        ``hits`` subscriptions (path ``/<queue>/hit/<i>``) match the posted
        messages, ``misses`` (``/<queue>/miss/<i>``) do not.
        """
        response = self.client.create_queue(queue)
        if response.status_code != 201:
            raise RuntimeError('%s: creating %s: %d %s' % (
                self.name, queue, response.status_code, response.text))
        subs = [(self.receiver.url('%s/hit/%d' % (queue, i)),
                 {'filter_policies': HIT_TAGS}) for i in range(hits)]
        subs += [(self.receiver.url('%s/miss/%d' % (queue, i)),
                  {'filter_policies': ['cold%d' % i]})
                 for i in range(misses)]
        self.redis.seed_subscriptions(PROJECT, queue, subs, ttl=SUB_TTL)


# Measurements.

Post = collections.namedtuple(
    'Post', 'latency deliver last_any complete extra')


def measure(side, queue, hits, total, posts):
    """Post ``posts + 1`` single-message requests; return the timed ones.

    :param hits: webhooks expected under ``/<queue>/hit``.
    :param total: webhooks the side should send in all (the stock
        notifier also sends to the subscriptions that do not match).
    """
    hit_prefix = '/%s/hit' % queue
    expected = {hit_prefix: hits}
    if total > hits:
        expected['/%s/miss' % queue] = total - hits
    timeout = WAIT_BASE + WAIT_PER_WEBHOOK * total
    timed = []
    for attempt in range(posts + 1):
        post = post_once(side, queue, expected, hit_prefix, total, timeout)
        if attempt:
            timed.append(post)
    return timed


def post_once(side, queue, expected, hit_prefix, total, timeout):
    """Post one message, wait for its webhooks; return the :class:`Post`."""
    token = uuid.uuid4().hex
    message = {'ttl': 300, 'body': token, 'filter_policies': HIT_TAGS}
    started = time.monotonic()
    response = side.client.post_messages(queue, [message])
    answered = time.monotonic()
    if response.status_code != 201:
        raise RuntimeError('%s: posting to %s: %d %s' % (
            side.name, queue, response.status_code, response.text))
    stats, complete = side.receiver.wait(token, expected, timeout)
    time.sleep(GRACE)
    stats = side.receiver.stats(token)
    counts = {prefix: entry['count'] for prefix, entry in stats.items()}
    extra = sum(counts.values()) - total
    extra += sum(entry['most_per_path'] - 1 for entry in stats.values())
    hit = stats.get(hit_prefix)
    deliver = hit['last'] - started if hit and complete else None
    last_any = (max(entry['last'] for entry in stats.values()) - started
                if stats and complete else None)
    if not complete:
        print('  %s %s: only %s of the expected %s webhooks within %d s'
              % (side.name, queue, counts, expected, timeout), flush=True)
    return Post(answered - started, deliver, last_any, complete, extra)


#: The subscription changes of (c), in order: what each does to the
#: changing subscription, and whether it matches afterwards.
CHANGES = (('create', HIT_TAGS, True), ('update', ['cold'], False),
           ('update', HIT_TAGS, True), ('delete', None, False))


def measure_changes(side, queue, rounds, warm_posts):
    """Post right after each change made through the other server.

    Each round creates a subscription that matches, makes it miss, match
    again, deletes it, posting after each change; then ``warm_posts``
    posts with no change before them.

    :returns: ``{kind: [Post]}``, kind ``warm`` for the warm posts.
    """
    hit_prefix = '/%s/hit' % queue
    found = collections.defaultdict(list)
    for number in range(rounds):
        url = side.receiver.url('%s/hit/changing%d' % (queue, number))
        path = None
        for kind, tags, matches in CHANGES:
            if kind == 'create':
                response = side.changer_client.subscribe(
                    queue, url, {'filter_policies': tags}, ttl=SUB_TTL)
                if response.status_code == 201:
                    path = '/v2/queues/%s/subscriptions/%s' % (
                        queue, response.json()['subscription_id'])
            elif kind == 'update':
                response = side.changer_client.patch(
                    path, json={'options': {'filter_policies': tags}})
            else:
                response = side.changer_client.delete(path)
            if response.status_code not in (201, 204) or path is None:
                raise RuntimeError('%s: %s of a subscription of %s: %d %s' % (
                    side.name, kind, queue, response.status_code,
                    response.text))
            hits = 11 if matches else 10
            found[kind].append(post_once(
                side, queue, {hit_prefix: hits}, hit_prefix, hits,
                WAIT_BASE))
        for _ in range(warm_posts):
            found['warm'].append(post_once(
                side, queue, {hit_prefix: 10}, hit_prefix, 10, WAIT_BASE))
    return found


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(timed):
    latencies = [p.latency for p in timed]
    return {
        'post': _median(latencies),
        'post_min': min(latencies),
        'post_max': max(latencies),
        'deliver': (_median([p.deliver for p in timed])
                    if all(p.complete for p in timed) else None),
        'deliver_max': (max(p.deliver for p in timed)
                        if all(p.complete for p in timed) else None),
        'last_any': (_median([p.last_any for p in timed])
                     if all(p.complete for p in timed) else None),
        'under20': sum(1 for latency in latencies if latency < 0.020),
        'posts': len(timed),
        'incomplete': sum(1 for p in timed if not p.complete),
        'extra': sum(p.extra for p in timed),
    }


def ms(seconds):
    if seconds is None:
        return 'timeout'
    value = seconds * 1000
    if value >= 100:
        return '{:,.0f}'.format(value)
    return '%.1f' % value


def ratio(a, b):
    if a is None or b is None or b == 0:
        return 'n/a'
    return '%.1fx' % (a / b)


def table(header, rows):
    out = ['| ' + ' | '.join(header) + ' |',
           '|' + '|'.join('-' * (len(h) + 1) + ':' for h in header) + '|']
    out += ['| ' + ' | '.join(str(cell) for cell in row) + ' |'
            for row in rows]
    return '\n'.join(out)


def verdict(met):
    return 'MET' if met else 'NOT MET'


def run(args, workdir):
    sides = {'stock': Side('stock', STOCK, workdir),
             'plugin': Side('plugin', PLUGIN, workdir)}
    try:
        for side in sides.values():
            side.start(changer=side is sides['plugin'])
        for name, side in sides.items():
            print('%s: redis-server, receiver, zaqar-filtering-server: '
                  'pids %s' % (name, ' '.join(map(str, side.pids()))),
                  flush=True)

        started = time.monotonic()
        for side in sides.values():
            for size in args.sizes:
                side.create_queue('a%d' % size, size, 0)
            side.create_queue('b10', 10, 0)
            side.create_queue('b%d' % args.big, 10, args.big - 10)
        print('seeded %s subscriptions per side in %.1f s\n' % (
            '{:,}'.format(2 * (sum(args.sizes) + 10 + args.big)),
            time.monotonic() - started), flush=True)

        # (a) every subscription matches; stock then plugin, size by size.
        results_a = {}
        for size in args.sizes:
            for name in ('stock', 'plugin'):
                posts = (args.slow_posts if name == 'stock' and size >= 5000
                         else args.posts)
                timed = measure(sides[name], 'a%d' % size, size, size, posts)
                results_a[name, size] = summarize(timed)
                s = results_a[name, size]
                print('(a) %-6s %6d subs: post %s ms (max %s), last webhook '
                      '%s ms' % (name, size, ms(s['post']), ms(s['post_max']),
                                 ms(s['deliver'])), flush=True)

        # (b) 10 of 10 versus 10 of N.
        results_b = {}
        big = 'b%d' % args.big
        for name in ('plugin', 'stock'):
            for queue, total in (('b10', 10), (big, args.big)):
                # The stock notifier delivers to every subscription.
                sent = total if name == 'stock' else 10
                posts = (args.slow_posts if sent >= 5000 else args.posts)
                timed = measure(sides[name], queue, 10, sent, posts)
                results_b[name, queue] = summarize(timed)
                s = results_b[name, queue]
                print('(b) %-6s %-6s: post %s ms, last of the 10 matching '
                      '%s ms' % (name, queue, ms(s['post']),
                                 ms(s['deliver'])), flush=True)
        # (c) posts right after a subscription change, in the plugin's
        # queue of args.big subscriptions, made through its other server.
        results_c = {}
        for kind, timed in measure_changes(sides['plugin'], big,
                                           args.change_rounds,
                                           args.posts).items():
            results_c[kind] = summarize(timed)
            print('(c) plugin %s %-7s: post %s ms (max %s)' % (
                big, kind, ms(results_c[kind]['post']),
                ms(results_c[kind]['post_max'])), flush=True)
        print('\nmeasurements took %.0f s; children of the plugin server '
              '(its delivery processes): %s' % (
                  time.monotonic() - started,
                  sorted(base.children_of(sides['plugin'].server.pid))))
    finally:
        for side in sides.values():
            side.stop()
    return results_a, results_b, results_c


def report(args, results_a, results_b, results_c):
    print('\n### (a) every subscription matches\n')
    rows = []
    for size in args.sizes:
        stock = results_a['stock', size]
        plugin = results_a['plugin', size]
        rows.append([
            '{:,}'.format(size),
            ms(stock['post']), ms(plugin['post']),
            '%s-%s' % (ms(plugin['post_min']), ms(plugin['post_max'])),
            ratio(stock['post'], plugin['post']),
            ms(stock['deliver']), ms(plugin['deliver']),
            ratio(stock['deliver'], plugin['deliver']),
            '%d/%d' % (stock['posts'], plugin['posts']),
            stock['extra'] + plugin['extra']])
    print(table(['subscriptions', 'stock post ms', 'plugin post ms',
                 'plugin post min-max ms', 'post stock/plugin',
                 'stock last webhook ms', 'plugin last webhook ms',
                 'delivery stock/plugin', 'posts stock/plugin',
                 'unexpected webhooks'], rows))

    print('\n### (b) the same 10 matching subscriptions in a queue of 10 '
          'and of %s\n' % '{:,}'.format(args.big))
    rows = []
    big = 'b%d' % args.big
    for name in ('plugin', 'stock'):
        for queue, total in (('b10', 10), (big, args.big)):
            s = results_b[name, queue]
            rows.append([
                name, '{:,}'.format(total),
                '10' if name == 'plugin' else '{:,}'.format(total),
                ms(s['post']),
                '%s-%s' % (ms(s['post_min']), ms(s['post_max'])),
                ms(s['deliver']), ms(s['deliver_max']), ms(s['last_any']),
                s['posts'], s['extra']])
    print(table(['notifier', 'subscriptions', 'webhooks sent',
                 'post ms', 'post min-max ms',
                 'last of the 10 matching ms', 'max of that ms',
                 'last webhook of all ms', 'posts',
                 'unexpected webhooks'], rows))

    print('\n### (c) a post right after a subscription change, in the '
          'queue of %s (the change made through another server process)\n'
          % '{:,}'.format(args.big))
    rows = []
    for kind in ('warm', 'create', 'update', 'delete'):
        s = results_c[kind]
        rows.append([kind if kind != 'warm' else 'none (warm)',
                     ms(s['post']), '%s-%s' % (ms(s['post_min']),
                                               ms(s['post_max'])),
                     ms(s['deliver']), s['posts'], s['extra']])
    print(table(['change before the post', 'post ms', 'post min-max ms',
                 'last of the matching ms', 'posts', 'unexpected webhooks'],
                rows))

    print('\n### Goals\n')
    top = max(args.sizes)
    low = min(args.sizes)
    plugin_top = results_a['plugin', top]['post']
    plugin_low = results_a['plugin', low]['post']
    ok_flat = ratio_at_most(plugin_top, plugin_low, 2)
    print('- 1. the post at %s matching subscriptions takes at most 2x the '
          'post at %s: %s (%s ms vs %s ms: %s)' % (
              '{:,}'.format(top), low, verdict(ok_flat), ms(plugin_top),
              ms(plugin_low), ratio(plugin_top, plugin_low)))
    warm = results_c['warm']['post']
    worst = max(('create', 'update', 'delete'),
                key=lambda kind: results_c[kind]['post'] or float('inf'))
    after = results_c[worst]['post']
    complete = all(results_c[kind]['incomplete'] == 0
                   and results_c[kind]['extra'] == 0 for kind in results_c)
    ok_change = complete and ratio_at_most(after, warm, 2)
    print('- 2. the post right after a subscription create, update or '
          'delete (through another server process) in a queue of %s takes '
          'at most 2x a warm post, and reaches exactly the subscriptions '
          'the change says: %s (worst, after a %s: %s ms vs %s ms: %s; '
          'deliveries %s)' % (
              '{:,}'.format(args.big), verdict(ok_change), worst, ms(after),
              ms(warm), ratio(after, warm),
              'exact' if complete else 'NOT exact'))
    stock = results_a['stock', top]['deliver']
    plugin = results_a['plugin', top]['deliver']
    ok_fast = ratio_at_most(plugin, stock, 1 / 8)
    print('- 3. the last of %s webhooks arrives at least 8x sooner than '
          'with the stock notifier: %s (%s ms vs %s ms: %s)' % (
              '{:,}'.format(top), verdict(ok_fast), ms(plugin), ms(stock),
              ratio(stock, plugin)))
    small = results_b['plugin', 'b10']['deliver']
    large = results_b['plugin', big]['deliver']
    ok_b = ratio_at_most(large, small, 2)
    print('- posting to a queue of %s subscriptions of which 10 match '
          'delivers in at most 2x the time of a 10-subscription queue: %s '
          '(%s ms vs %s ms: %s)' % (
              '{:,}'.format(args.big), verdict(ok_b), ms(large), ms(small),
              ratio(large, small)))
    unexpected = sum(r['extra'] for r in results_a.values())
    unexpected += sum(r['extra'] for r in results_b.values())
    print('- no unexpected webhook anywhere: %s (%d)' % (
        verdict(unexpected == 0), unexpected))
    return ok_flat and ok_change and ok_fast and ok_b and unexpected == 0


def ratio_at_most(a, b, most):
    """Return whether a / b <= most (False when either is missing)."""
    return a is not None and b is not None and b > 0 and a / b <= most


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--receiver', type=int, metavar='PORT',
                        help=argparse.SUPPRESS)
    parser.add_argument('--sizes', type=int, nargs='+',
                        default=[10, 1000, 5000],
                        help='queue sizes for (a) (default: 10 1000 5000)')
    parser.add_argument('--big', type=int, default=10000,
                        help='queue size for (b) (default: 10000)')
    parser.add_argument('--posts', type=int, default=5,
                        help='timed posts per queue, after one warm-up '
                             '(default: 5)')
    parser.add_argument('--slow-posts', type=int, default=3,
                        help='timed posts where 5,000 or more webhooks go '
                             'out per post (default: 3)')
    parser.add_argument('--change-rounds', type=int, default=3,
                        help='rounds of subscription changes in (c), each '
                             'a create, two updates and a delete, with a '
                             'timed post after each (default: 3)')
    parser.add_argument('--keep', action='store_true',
                        help='keep the configuration and logs')
    args = parser.parse_args()
    if args.receiver:
        serve_receiver(args.receiver)
        return 0

    signal.signal(signal.SIGTERM, _on_sigterm)
    print('zaqar-filtering notifier benchmark: stock notifier versus '
          'plugin')
    print('Python %s on %s; %d CPUs; %s; load average %s' % (
        platform.python_version(), platform.platform(), os.cpu_count(),
        datetime.datetime.now().strftime('%Y-%m-%d %H:%M'),
        _load()), flush=True)
    workdir = tempfile.mkdtemp(prefix='zaqar-filtering-bench-')
    try:
        results = run(args, workdir)
    except KeyboardInterrupt:
        print('\ninterrupted; everything the bench started is stopped; '
              'configuration and logs: %s' % workdir, file=sys.stderr)
        return 130
    except Exception:
        print('configuration and logs kept in %s' % workdir,
              file=sys.stderr)
        raise
    print('load average at the end: %s' % _load())
    if args.keep:
        print('configuration and logs: %s' % workdir)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if report(args, *results) else 1


def _load():
    return ' '.join('%.2f' % load for load in os.getloadavg())


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt()


if __name__ == '__main__':
    sys.exit(main())
