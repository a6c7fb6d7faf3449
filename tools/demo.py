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

"""The CMQ scenarios through a real Zaqar server with the plugin.

Run from the repository root: ``.venv/bin/python tools/demo.py`` (``make
demo``). It starts, on 127.0.0.1 and free ports, a redis-server, a webhook
receiver and a ``zaqar-filtering-server`` whose pipelines hold the plugin's
two stages, then:

1. creates Tencent CMQ's subscribers A (tag ``apple``), B (``xiaomi``),
   C (``imac`` + ``xiaomi``) and D (no tag) as webhook subscriptions through
   Zaqar's API, posts 100 messages tagged ``apple``, ``imac``, ``iphone``
   and ``macbook`` (10 per request) and one untagged message, and prints
   how many messages each subscriber received;
2. creates subscribers with the binding keys ``1.*.0``, ``1.#.0`` and
   ``#``, posts messages with the routing keys ``1.x.0``, ``1.0``,
   ``1.2.3.4.4.2.2.0`` and ``2.0``, and prints who received which;
3. tries to create a subscription with an invalid tag and prints the 400;
4. plays CMQ's scenario 4: subscribers A, B and C get 200 messages; A
   fails 100 of them and B 30 (HTTP 500), so they are retried; it prints
   what is pending, restarts the server, lets A and B recover and prints
   that each subscriber got every message once.

Everything it started is stopped by PID at the end, also after an error or
Ctrl-C. The exit status is 0 when every count is as CMQ documents, 1 when
one is not, and 2 when the demo could not run.
"""

import os
import shutil
import signal
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.functional import base  # noqa: E402
from zaqar_filtering import demo  # noqa: E402

PIPELINES = {'storage': {
    'message_pipeline': 'zaqar_filtering.notifier',
    'subscription_pipeline': 'zaqar_filtering.validation'}}
#: Exponential decay retries after 0.2, 0.4, 0.8, 1, 1 ... s instead of
#: 1, 2, 4 ... 512 s, so that the retry scenario takes seconds.
SHORT_RETRIES = {'filtering:delivery': {'decay_first_seconds': '0.2',
                                        'decay_max_seconds': '1',
                                        'poll_seconds': '0.1'}}
PROJECT = 'cmq-demo'

TAG_QUEUE = 'cmq-tags'
#: CMQ scenario 1: subscriber, tags.
TAG_SUBSCRIBERS = [('A', ['apple']), ('B', ['xiaomi']),
                   ('C', ['imac', 'xiaomi']), ('D', [])]
MESSAGE_TAGS = ['apple', 'imac', 'iphone', 'macbook']
TAGGED_MESSAGES = 100
#: What CMQ documents: A and C share a tag with every message, B none;
#: D has no tags and receives everything, the untagged message included.
TAG_EXPECTED = {'A': 100, 'B': 0, 'C': 100, 'D': 101}

KEY_QUEUE = 'cmq-keys'
#: Subscriber, binding key.
KEY_SUBSCRIBERS = [('E', '1.*.0'), ('F', '1.#.0'), ('G', '#')]
ROUTING_KEYS = ['1.x.0', '1.0', '1.2.3.4.4.2.2.0', '2.0']
#: ``*`` is exactly one word, ``#`` zero or more.
KEY_EXPECTED = {'E': {'1.x.0'},
                'F': {'1.x.0', '1.0', '1.2.3.4.4.2.2.0'},
                'G': set(ROUTING_KEYS)}

INVALID_OPTIONS = {'filter_policies': ['abcdefghijklmnopq']}

RETRY_QUEUE = 'cmq-retries'
RETRY_MESSAGES = 200
#: CMQ scenario 4: which messages each subscriber fails until it recovers.
RETRY_FAILS = {'A': lambda n: n >= 100, 'B': lambda n: n % 5 == 0 and n < 150,
               'C': lambda n: False}

#: Seconds to wait for the deliveries CMQ promises.
TOPIC = 'orders'
#: Target queues and the tag each subscribes to, in the topic scene.
TOPIC_QUEUES = {'orders-placed': 'order_placed',
                'orders-cancelled': 'order_cancelled'}
TOPIC_TAGS = ['order_placed', 'order_cancelled', 'order_placed',
              'order_shipped', 'order_placed', 'order_cancelled']

DELIVERY_TIMEOUT = 30
#: Seconds without a new delivery after which deliveries count as settled
#: (a delivery that should not happen would show up within it).
GRACE = 0.5


class Interrupted(Exception):
    """SIGTERM arrived: stop what was started and exit."""


def _on_sigterm(signum, frame):
    raise Interrupted()


def _check(response, status, what):
    if response.status_code != status:
        raise RuntimeError('%s: expected HTTP %d, got %d: %s' % (
            what, status, response.status_code, response.text))
    return response


def _settle(receiver, prefix, count):
    """Wait for ``count`` requests under ``/prefix``, then for quiet."""
    try:
        receiver.wait_for(count, prefix, timeout=DELIVERY_TIMEOUT)
    except AssertionError:
        # Fewer arrived: the table shows which count is wrong.
        pass
    deadline = time.monotonic() + DELIVERY_TIMEOUT
    seen = len(receiver.requests(prefix))
    while time.monotonic() < deadline:
        time.sleep(GRACE)
        now = len(receiver.requests(prefix))
        if now == seen:
            break
        seen = now


def _subscribe(client, receiver, queue, name, options):
    response = client.subscribe(queue, receiver.url('%s/%s' % (queue, name)),
                                options)
    _check(response, 201, 'subscribing %s to %s' % (name, queue))


def _post(client, queue, messages):
    for start in range(0, len(messages), 10):
        _check(client.post_messages(queue, messages[start:start + 10]), 201,
               'posting to %s' % queue)


def tag_scenario(client, receiver):
    """CMQ scenario 1 and an untagged message; return True if as expected."""
    _check(client.create_queue(TAG_QUEUE), 201, 'creating ' + TAG_QUEUE)
    for name, tags in TAG_SUBSCRIBERS:
        _subscribe(client, receiver, TAG_QUEUE, name,
                   {'filter_policies': tags} if tags else {})
    _post(client, TAG_QUEUE,
          [{'ttl': 300, 'body': {'n': i}, 'filter_policies': MESSAGE_TAGS}
           for i in range(TAGGED_MESSAGES)])
    _post(client, TAG_QUEUE, [{'ttl': 300, 'body': 'untagged'}])
    _settle(receiver, TAG_QUEUE, TAG_EXPECTED['D'])

    print('1. CMQ scenario 1: %d messages tagged %s (10 per request), then '
          '1 untagged message\n' % (TAGGED_MESSAGES, ', '.join(MESSAGE_TAGS)))
    rows = []
    ok = True
    for name, tags in TAG_SUBSCRIBERS:
        received = receiver.requests('%s/%s' % (TAG_QUEUE, name))
        untagged = sum(1 for r in received
                       if r.json and r.json.get('body') == 'untagged')
        count = len(received)
        good = count == TAG_EXPECTED[name]
        ok = ok and good
        rows.append([name, '+'.join(tags) or '(none)', count, untagged,
                     TAG_EXPECTED[name], 'ok' if good else 'WRONG'])
    print(demo.table(['subscriber', 'tags', 'messages received',
                      'of which untagged', 'expected', ''], rows))
    return ok


def key_scenario(client, receiver):
    """Binding keys against routing keys; return True if as expected."""
    _check(client.create_queue(KEY_QUEUE), 201, 'creating ' + KEY_QUEUE)
    for name, key in KEY_SUBSCRIBERS:
        _subscribe(client, receiver, KEY_QUEUE, name, {'binding_keys': [key]})
    _post(client, KEY_QUEUE, [{'ttl': 300, 'body': key, 'routing_key': key}
                              for key in ROUTING_KEYS])
    _settle(receiver, '%s/G' % KEY_QUEUE, len(KEY_EXPECTED['G']))

    print('\n2. Binding keys (* is exactly one word, # zero or more) '
          'against routing keys\n')
    rows = []
    ok = True
    for name, key in KEY_SUBSCRIBERS:
        bodies = [r.json.get('body') if r.json else None
                  for r in receiver.requests('%s/%s' % (KEY_QUEUE, name))]
        good = (sorted(bodies) == sorted(KEY_EXPECTED[name]))
        ok = ok and good
        rows.append([name, key]
                    + ['yes' if routing in bodies else 'no'
                       for routing in ROUTING_KEYS]
                    + [len(bodies), 'ok' if good else 'WRONG'])
    print(demo.table(['subscriber', 'binding key'] + ROUTING_KEYS
                     + ['received', ''], rows))
    return ok


def invalid_subscription(client, receiver):
    """Show the 400 for an invalid tag; return True if it is a 400."""
    response = client.subscribe(TAG_QUEUE, receiver.url('invalid'),
                                INVALID_OPTIONS)
    print('\n3. An invalid subscription is rejected\n')
    print('  POST /v2/queues/%s/subscriptions  options=%s' % (
        TAG_QUEUE, INVALID_OPTIONS))
    try:
        description = response.json().get('description')
    except ValueError:
        description = response.text
    print('  -> HTTP %d: %s' % (response.status_code, description))
    return response.status_code == 400


def retry_scenario(client, receiver, server):
    """CMQ scenario 4 with a restart; return True if as expected."""
    _check(client.create_queue(RETRY_QUEUE), 201, 'creating ' + RETRY_QUEUE)
    ids = {}
    for name, fails in RETRY_FAILS.items():
        path = '%s/%s' % (RETRY_QUEUE, name)
        receiver.fail(path, when=lambda body, fails=fails:
                      fails(body['body']['n']))
        response = _check(client.subscribe(RETRY_QUEUE, receiver.url(path)),
                          201, 'subscribing %s' % name)
        ids[name] = response.json()['subscription_id']
    print('\n4. CMQ scenario 4: %d messages to A, B and C (exponential decay '
          'retries, shortened for the demo); A answers HTTP 500 to 100 of '
          'them, B to 30, C to none\n' % RETRY_MESSAGES)
    _post(client, RETRY_QUEUE, [{'body': {'n': n}, 'ttl': 3600}
                                for n in range(RETRY_MESSAGES)])
    receiver.wait_for(RETRY_MESSAGES, RETRY_QUEUE + '/C', DELIVERY_TIMEOUT,
                      status=200)
    receiver.wait_for(100, RETRY_QUEUE + '/A', DELIVERY_TIMEOUT, status=200)
    # A few retry rounds.
    time.sleep(3 * GRACE + 1)

    def counts(name):
        response = _check(client.get(
            '/v2/queues/%s/subscriptions/%s/deliveries'
            % (RETRY_QUEUE, ids[name])), 200, 'deliveries of ' + name)
        return response.json()

    before = {name: counts(name) for name in RETRY_FAILS}
    print(demo.table(['subscriber', 'pending', 'retrying', 'delivered',
                      'last error'],
                     [[name, stats['pending'], stats['retrying'],
                       stats['delivered'], stats['last_error'] or '-']
                      for name, stats in before.items()]))
    if before['B']['pending'] > 30:
        print('\n  B has %d pending, not 30: once a retry fails again, a '
              'subscriber\'s later messages\n  wait behind it (CMQ\'s '
              'blocking policy).' % before['B']['pending'])
    print('\n  Restarting zaqar-filtering-server; then A and B recover.\n')
    server.stop()
    server.start()
    for name in RETRY_FAILS:
        receiver.recover('%s/%s' % (RETRY_QUEUE, name))
    rows = []
    ok = (before['A']['pending'] == 100 and before['B']['pending'] >= 30
          and before['C']['pending'] == 0)
    for name in RETRY_FAILS:
        path = '%s/%s' % (RETRY_QUEUE, name)
        try:
            receiver.wait_for(RETRY_MESSAGES, path, DELIVERY_TIMEOUT,
                              status=200)
        except AssertionError:
            pass
        time.sleep(GRACE)
        got = [r.json['body']['n'] for r in receiver.requests(path,
                                                              status=200)]
        twice = len(got) - len(set(got))
        right = len(set(got)) == RETRY_MESSAGES and not twice
        ok = ok and right
        rows.append([name, len(set(got)), twice, counts(name)['pending'],
                     'ok' if right else 'WRONG'])
    print(demo.table(['subscriber', 'messages received (2xx)',
                      'received twice', 'pending', ''], rows))
    return ok


def topic_scenario(client):
    """An orders topic fanned out into two queues; True if as expected."""
    _check(client.put('/v2/topics/' + TOPIC, json={}), 201,
           'creating topic ' + TOPIC)
    for queue, tag in TOPIC_QUEUES.items():
        _check(client.create_queue(queue), 201, 'creating ' + queue)
        _check(client.post('/v2/topics/%s/subscriptions' % TOPIC, json={
            'subscriber': 'queue:' + queue, 'ttl': 3600,
            'options': {'filter_policies': [tag]}}), 201,
            'subscribing queue:%s to %s' % (queue, TOPIC))
    published = [(n, tag) for n, tag in enumerate(TOPIC_TAGS)]
    _check(client.post('/v2/topics/%s/messages' % TOPIC, json={'messages': [
        {'ttl': 300, 'body': {'order': n, 'event': tag},
         'filter_policies': [tag]} for n, tag in published]}), 201,
        'publishing to ' + TOPIC)
    print('\n5. Topic -> queues (CMQ): %d orders published to topic %s; '
          'queue:%s subscribes to order_placed,\n   queue:%s to '
          'order_cancelled; each queue is then claimed\n'
          % (len(published), TOPIC, *TOPIC_QUEUES))
    deadline = time.monotonic() + DELIVERY_TIMEOUT
    rows = []
    ok = True
    for queue, tag in TOPIC_QUEUES.items():
        expected = sorted(n for n, t in published if t == tag)
        while (client.total_messages(queue) < len(expected)
               and time.monotonic() < deadline):
            time.sleep(0.1)
        response = _check(client.post(
            '/v2/queues/%s/claims' % queue, params={'limit': 20},
            json={'ttl': 60, 'grace': 60}), 201, 'claiming from ' + queue)
        claimed = sorted(m['body']['order'] for m in response.json()[
            'messages'])
        good = claimed == expected
        ok = ok and good
        rows.append([queue, tag, ' '.join(map(str, claimed)),
                     ' '.join(map(str, expected)), 'ok' if good else 'WRONG'])
    stats = _check(client.get('/v2/topics/%s/stats' % TOPIC), 200,
                   'topic stats')
    retained = stats.json()['messages']['retained']
    ok = ok and retained == 0
    print(demo.table(['queue', 'subscribed to', 'orders claimed',
                      'expected', ''], rows))
    print('\n  Topic %s retains %d messages (it keeps none once '
          'delivered).' % (TOPIC, retained))
    return ok


def run(workdir):
    started = []
    try:
        redis_server = base.RedisServer(workdir)
        started.append(redis_server)
        redis_server.start()
        receiver = base.WebhookReceiver().start()
        started.append(receiver)
        port = base.free_port()
        conf = base.write_zaqar_conf(workdir, redis_server.uri, port,
                                     dict(PIPELINES, **SHORT_RETRIES))
        server = base.ZaqarServer(conf, port,
                                  os.path.join(workdir, 'zaqar.log'))
        started.append(server)
        server.start()
        print('Started redis-server (pid %d, port %d), a webhook receiver '
              '(port %d) and zaqar-filtering-server (pid %d, %s) with\n'
              '[storage] message_pipeline = zaqar_filtering.notifier and '
              'subscription_pipeline = zaqar_filtering.validation\n' % (
                  redis_server.pid, redis_server.port, receiver.port,
                  server.pid, server.url))
        client = base.Client(server.url, project=PROJECT)
        try:
            results = [tag_scenario(client, receiver),
                       key_scenario(client, receiver),
                       invalid_subscription(client, receiver),
                       retry_scenario(client, receiver, server),
                       topic_scenario(client)]
        finally:
            client.close()
        return all(results)
    finally:
        for process in reversed(started):
            process.stop()


def main():
    signal.signal(signal.SIGTERM, _on_sigterm)
    workdir = tempfile.mkdtemp(prefix='zaqar-filtering-demo-')
    try:
        ok = run(workdir)
    except (KeyboardInterrupt, Interrupted):
        shutil.rmtree(workdir, ignore_errors=True)
        print('\nInterrupted; everything the demo started is stopped.',
              file=sys.stderr)
        return 130
    except Exception as exc:
        # Keep the configuration and the logs for a look.
        print('\nThe demo failed: %s\nConfiguration and logs: %s'
              % (exc, workdir), file=sys.stderr)
        return 2
    shutil.rmtree(workdir, ignore_errors=True)
    if ok:
        print('\nAll counts are as CMQ documents them. Everything the demo '
              'started is stopped.')
        return 0
    print('\nSome counts differ from what CMQ documents (see WRONG above).',
          file=sys.stderr)
    return 1


if __name__ == '__main__':
    sys.exit(main())
