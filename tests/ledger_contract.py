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

"""What every delivery ledger does, as a mixin of test cases.

A test class mixes it into ``unittest.TestCase`` and defines
``make_ledger()``, returning an empty ledger. Times are plain numbers: the
ledger only compares them.
"""

import random

from zaqar_filtering.delivery import ledger as base
from zaqar_filtering.policy import retry

NOW = 1000000.0
LEASE = 30.0


def new(sub='s1', strategy=retry.EXPONENTIAL_DECAY, bodies=('m1',),
        queue='q', project='p', published=NOW, lifecycle=86400.0,
        policy=None, subs=None, keys=()):
    """Return a batch of ``bodies`` to ``sub`` (or to each of ``subs``).

    :param keys: the ordering key of each body, if the queue is ordered.
    """
    return base.Batch(
        project=project, queue=queue, published=published,
        deadline=published + lifecycle, bodies=(tuple(bodies),),
        headers=({'Content-Type': 'application/json'},),
        policies=(policy or {},),
        targets=tuple(base.Target(s, 'http://127.0.0.1:1/%s' % s, strategy)
                      for s in subs or [sub]),
        keys=tuple(keys))


def keyed(*pairs, **kwargs):
    """Return a batch of ``(body, ordering key)`` pairs (see :func:`new`)."""
    return new(bodies=[body for body, _ in pairs],
               keys=[key for _, key in pairs], **kwargs)


class LedgerContract:
    """Test cases for a :class:`~zaqar_filtering.delivery.ledger.Ledger`."""

    def make_ledger(self):
        raise NotImplementedError

    def claimers(self):
        """Return ledgers that claim from the same deliveries.

        Each stands for a delivery process; by default they are one.
        """
        return [self.ledger, self.ledger]

    def setUp(self):
        super().setUp()
        self.ledger = self.make_ledger()

    def claim(self, now=NOW, limit=100):
        return self.ledger.claim(now, limit, LEASE)

    def bodies(self, deliveries):
        return sorted(d.body for d in deliveries)

    def test_enqueued_deliveries_are_claimed_with_their_fields(self):
        self.ledger.enqueue(new(bodies=('a', 'b'), project=None,
                                policy={'retries_with_no_delay': 1},
                                strategy=retry.ZAQAR))
        claimed = self.claim()
        self.assertEqual(['a', 'b'], [d.body for d in claimed])
        first = claimed[0]
        self.assertIsNone(first.project)
        self.assertEqual(('q', 's1', 'http://127.0.0.1:1/s1'),
                         (first.queue, first.subscription_id,
                          first.subscriber))
        self.assertEqual({'Content-Type': 'application/json'}, first.headers)
        self.assertEqual({'retries_with_no_delay': 1}, first.policy)
        self.assertEqual((NOW, NOW + 86400.0, 0, retry.ZAQAR),
                         (first.published, first.deadline, first.attempts,
                          first.strategy))
        self.assertLess(claimed[0].id, claimed[1].id)

    def test_claimed_deliveries_are_leased(self):
        self.ledger.enqueue(new(bodies=('a',)))
        [first] = self.claim()
        self.assertEqual([], self.claim(NOW + LEASE - 1))
        # The lease ended: the holder is presumed dead.
        [again] = self.claim(NOW + LEASE + 1)
        self.assertEqual(first.id, again.id)
        self.assertNotEqual(first.token, again.token)
        # The first holder can no longer record anything.
        self.assertFalse(self.ledger.finish(first, base.DELIVERED, None,
                                            NOW + LEASE + 2))
        self.assertFalse(self.ledger.retry(first, NOW + 100, 'HTTP 500',
                                           NOW + LEASE + 2))
        self.assertTrue(self.ledger.finish(again, base.DELIVERED, None,
                                           NOW + LEASE + 2))
        self.assertEqual([], self.claim(NOW + 10 * LEASE))

    def test_claim_respects_limit_and_due_time(self):
        self.ledger.enqueue(new(bodies=('a', 'b', 'c')))
        self.assertEqual([], self.claim(NOW - 1))
        self.assertEqual(2, len(self.claim(limit=2)))
        self.assertEqual(['c'], self.bodies(self.claim()))

    def test_retry_makes_due_later_and_counts(self):
        self.ledger.enqueue(new(bodies=('a',)))
        [delivery] = self.claim()
        self.assertTrue(self.ledger.retry(delivery, NOW + 5, 'HTTP 500',
                                          NOW + 1))
        self.assertEqual(NOW + 5, self.ledger.next_due())
        self.assertEqual([], self.claim(NOW + 4))
        [again] = self.claim(NOW + 5)
        self.assertEqual(1, again.attempts)
        [stats] = self.ledger.stats()
        self.assertEqual((1, 1, 'HTTP 500', NOW + 1),
                         (stats.pending, stats.retrying, stats.last_error,
                          stats.last_error_at))

    def test_finish_counts_outcomes_and_stats_select(self):
        self.ledger.enqueue(new('s1', bodies=('a', 'b', 'c')))
        self.ledger.enqueue(new('s2', queue='other', bodies=('d',)))
        a, b, c, d = self.claim()
        self.ledger.finish(a, base.DELIVERED, None, NOW)
        self.ledger.finish(b, base.DROPPED, 'HTTP 503', NOW + 2)
        self.ledger.finish(c, base.EXPIRED, 'HTTP 504', NOW + 3)
        stats = {s.subscription_id: s for s in self.ledger.stats()}
        self.assertEqual((0, 0, 1, 1, 1, 'HTTP 504', 'http://127.0.0.1:1/s1'),
                         (stats['s1'].pending, stats['s1'].retrying,
                          stats['s1'].delivered, stats['s1'].dropped,
                          stats['s1'].expired, stats['s1'].last_error,
                          stats['s1'].subscriber))
        self.assertEqual(1, stats['s2'].pending)
        self.assertEqual(['s2'], [s.subscription_id for s in
                                  self.ledger.stats('p', 'other')])
        self.assertEqual(['s1'], [s.subscription_id for s in
                                  self.ledger.stats('p', 'q', 's1')])
        self.assertEqual([], self.ledger.stats('another-project'))
        self.assertRaises(ValueError, self.ledger.finish, d, 'lost', None,
                          NOW)

    def test_backoff_hands_out_one_at_a_time_in_order(self):
        self.ledger.enqueue(new(strategy=retry.BACKOFF, bodies=('a', 'b')))
        self.ledger.enqueue(new(strategy=retry.BACKOFF, bodies=('c',)))
        [a] = self.claim()
        self.assertEqual('a', a.body)
        self.assertEqual([], self.claim())
        self.ledger.retry(a, NOW + 10, 'HTTP 500', NOW)
        # b and c wait behind the retried a.
        self.assertEqual([], self.claim(NOW + 5))
        [a] = self.claim(NOW + 10)
        self.ledger.finish(a, base.DROPPED, 'HTTP 500', NOW + 10)
        [b] = self.claim(NOW + 10)
        self.assertEqual('b', b.body)
        self.ledger.finish(b, base.DELIVERED, None, NOW + 11)
        [c] = self.claim(NOW + 11)
        self.assertEqual('c', c.body)

    def test_backoff_subscribers_do_not_wait_for_each_other(self):
        self.ledger.enqueue(new('s1', strategy=retry.BACKOFF,
                                bodies=('a', 'b')))
        self.ledger.enqueue(new('s2', strategy=retry.BACKOFF,
                                bodies=('c', 'd')))
        self.assertEqual(['a', 'c'], self.bodies(self.claim()))

    def test_exponential_decay_blocks_after_a_failed_retry(self):
        self.ledger.enqueue(new(bodies=('a', 'b', 'c')))
        a, b, c = self.claim()
        self.ledger.finish(b, base.DELIVERED, None, NOW)
        # A first failure does not block.
        self.ledger.retry(a, NOW + 1, 'HTTP 500', NOW)
        self.ledger.enqueue(new(bodies=('d',), published=NOW))
        [d] = self.claim()
        self.ledger.finish(d, base.DELIVERED, None, NOW)
        [a] = self.claim(NOW + 1)
        # The retry fails again: the subscriber's later messages wait.
        self.ledger.retry(a, NOW + 3, 'HTTP 500', NOW + 1)
        self.ledger.retry(c, NOW + 2, 'HTTP 500', NOW + 1)
        self.ledger.enqueue(new(bodies=('e',), published=NOW + 2))
        self.assertEqual([], self.claim(NOW + 2))
        [a] = self.claim(NOW + 3)
        self.assertEqual('a', a.body)
        [stats] = self.ledger.stats()
        self.assertEqual((3, 2), (stats.pending, stats.retrying))
        # It goes through: the waiting ones go, concurrently.
        self.ledger.finish(a, base.DELIVERED, None, NOW + 3)
        self.assertEqual(['c', 'e'], self.bodies(self.claim(NOW + 3)))

    def test_other_subscribers_are_not_blocked(self):
        self.ledger.enqueue(new('s1', bodies=('a',)))
        [a] = self.claim()
        self.ledger.retry(a, NOW + 1, 'HTTP 500', NOW)
        [a] = self.claim(NOW + 1)
        self.ledger.retry(a, NOW + 100, 'HTTP 500', NOW + 1)
        self.ledger.enqueue(new('s1', bodies=('b',), published=NOW + 2))
        self.ledger.enqueue(new('s2', bodies=('c',), published=NOW + 2))
        self.assertEqual(['c'], self.bodies(self.claim(NOW + 2)))

    def test_a_dropped_blocker_unblocks(self):
        self.ledger.enqueue(new(bodies=('a', 'b')))
        a, b = self.claim()
        self.ledger.retry(a, NOW + 1, 'HTTP 500', NOW)
        self.ledger.retry(b, NOW + 1, 'HTTP 500', NOW)
        [a, b] = self.claim(NOW + 1)
        self.ledger.retry(a, NOW + 3, 'HTTP 500', NOW + 1)
        self.ledger.retry(b, NOW + 3, 'HTTP 500', NOW + 1)
        [blocker] = self.claim(NOW + 3)
        self.ledger.finish(blocker, base.EXPIRED, 'HTTP 500', NOW + 3)
        [other] = self.claim(NOW + 3)
        self.assertNotEqual(blocker.body, other.body)

    def test_zaqar_schedule_neither_orders_nor_blocks(self):
        self.ledger.enqueue(new(strategy=retry.ZAQAR, bodies=('a', 'b')))
        a, b = self.claim()
        self.ledger.retry(a, NOW + 1, 'HTTP 500', NOW)
        [a] = self.claim(NOW + 1)
        self.ledger.retry(a, NOW + 9, 'HTTP 500', NOW + 1)
        self.ledger.retry(b, NOW + 2, 'HTTP 500', NOW + 1)
        self.assertEqual(['b'], self.bodies(self.claim(NOW + 2)))

    def test_forget_drops_a_subscriptions_deliveries(self):
        self.ledger.enqueue(new('s1', bodies=('a', 'b')))
        self.ledger.enqueue(new('s2', bodies=('c',)))
        [a, b, c] = self.claim()
        self.ledger.retry(a, NOW + 1, 'HTTP 500', NOW)
        self.assertEqual(2, self.ledger.forget('p', 'q', 's1'))
        # Also what was posted to it but not yet spread into deliveries.
        self.ledger.enqueue(new('s1', bodies=('d',)))
        self.assertEqual(0, self.ledger.forget('p', 'q', 's1'))
        self.ledger.enqueue(new('s2', bodies=('e',)))
        self.assertEqual(['c', 'e'], self.bodies(self.claim(NOW + LEASE)))
        self.assertFalse(self.ledger.finish(b, base.DELIVERED, None, NOW))
        self.assertEqual(['s2'], [s.subscription_id
                                  for s in self.ledger.stats()])
        self.assertEqual(0, self.ledger.forget('p', 'q', 'unknown'))

    def test_a_batch_shares_its_parts_between_targets(self):
        self.ledger.enqueue(base.Batch(
            project='p', queue='q', published=NOW, deadline=NOW + 60,
            bodies=(('a1', 'a2'), ('b1', 'b2')),
            headers=({'H': 'a'}, {'H': 'b'}),
            policies=({}, {'minimum_delay': 5}),
            targets=(base.Target('s1', 'http://a/', retry.ZAQAR, 0, 0, 1),
                     base.Target('s2', 'http://b/', retry.ZAQAR, 1, 1, 0),
                     base.Target('s3', 'http://c/', retry.ZAQAR, 0, 1, 0))))
        found = sorted((d.subscription_id, d.body, d.headers['H'],
                        d.policy.get('minimum_delay')) for d in self.claim())
        self.assertEqual([('s1', 'a1', 'a', 5), ('s1', 'a2', 'a', 5),
                          ('s2', 'b1', 'b', None), ('s2', 'b2', 'b', None),
                          ('s3', 'a1', 'b', None), ('s3', 'a2', 'b', None)],
                         found)

    def test_a_large_batch_is_claimed_whole_and_once(self):
        subs = ['s%d' % i for i in range(1500)]
        self.ledger.enqueue(new(subs=subs, bodies=('a', 'b')))
        self.assertLessEqual(self.ledger.next_due(), NOW)
        seen = []
        for _ in range(100):
            claimed = self.claim(limit=700)
            if not claimed and self.ledger.next_due() is None:
                break
            seen += [(d.subscription_id, d.body) for d in claimed]
        self.assertEqual(3000, len(seen))
        self.assertEqual(3000, len(set(seen)))

    def test_record_keeps_many_outcomes_at_once(self):
        self.ledger.enqueue(new(bodies=('a', 'b', 'c')))
        a, b, c = self.claim()
        kept = self.ledger.record([
            base.Outcome(a, base.DELIVERED, now=NOW),
            base.Outcome(b, base.RETRIED, 'HTTP 500', NOW + 9, NOW),
            base.Outcome(c, base.DROPPED, 'HTTP 502', now=NOW + 1),
            base.Outcome(a, base.DELIVERED, now=NOW)])
        self.assertEqual([True, True, True, False], kept)
        [stats] = self.ledger.stats()
        self.assertEqual((1, 1, 1, 1, 'HTTP 502'),
                         (stats.pending, stats.retrying, stats.delivered,
                          stats.dropped, stats.last_error))
        self.assertEqual(NOW + 9, self.ledger.next_due())

    def test_next_due_is_none_when_empty(self):
        self.assertIsNone(self.ledger.next_due())
        self.ledger.enqueue(new(bodies=('a',)))
        self.assertLessEqual(self.ledger.next_due(), NOW)
        self.claim(limit=0)
        self.assertEqual(1, len(self.claim()))
        self.assertEqual(NOW + LEASE, self.ledger.next_due())

    # Ordering keys (ordered queues): per subscription, a key's deliveries
    # go one at a time, in order; other keys and unkeyed ones do not wait.

    def test_a_key_waits_for_its_earlier_delivery_only(self):
        for strategy in (retry.ZAQAR, retry.EXPONENTIAL_DECAY):
            self.ledger = self.make_ledger()
            self.ledger.enqueue(keyed(('a1', 'a'), ('b1', 'b'), ('a2', 'a'),
                                      ('u1', None), ('b2', 'b'), ('u2', None),
                                      strategy=strategy))
            a1, b1, u1, u2 = self.claim()
            self.assertEqual(['a1', 'b1', 'u1', 'u2'],
                             [d.body for d in (a1, b1, u1, u2)], strategy)
            self.ledger.retry(a1, NOW + 10, 'HTTP 500', NOW)
            self.ledger.finish(b1, base.DELIVERED, None, NOW)
            # b moves on while a's first delivery is being retried.
            self.assertEqual(['b2'], self.bodies(self.claim(NOW + 1)))
            [a1] = self.claim(NOW + 10)
            self.assertEqual('a1', a1.body)
            self.ledger.finish(a1, base.DELIVERED, None, NOW + 10)
            self.assertEqual(['a2'], self.bodies(self.claim(NOW + 10)))

    def test_a_key_waits_across_posts_and_behind_a_lease(self):
        self.ledger.enqueue(keyed(('k1', 'k'), strategy=retry.ZAQAR))
        [k1] = self.claim()
        self.ledger.enqueue(keyed(('k2', 'k'), ('x1', 'x'),
                                  strategy=retry.ZAQAR))
        [x1] = self.claim()
        self.assertEqual('x1', x1.body)
        self.ledger.finish(x1, base.DELIVERED, None, NOW)
        # The lease ends: the same delivery is handed out again, not k2.
        [again] = self.claim(NOW + LEASE + 1)
        self.assertEqual((k1.id, 'k1'), (again.id, again.body))
        self.assertFalse(self.ledger.finish(k1, base.DELIVERED, None, NOW))
        self.ledger.finish(again, base.DELIVERED, None, NOW + LEASE + 1)
        self.assertEqual(['k2'], self.bodies(self.claim(NOW + LEASE + 1)))

    def test_a_dropped_or_expired_delivery_lets_its_key_move_on(self):
        self.ledger.enqueue(keyed(('k1', 'k'), ('k2', 'k'), ('k3', 'k'),
                                  strategy=retry.ZAQAR))
        [k1] = self.claim()
        self.ledger.finish(k1, base.DROPPED, 'HTTP 500', NOW)
        [k2] = self.claim()
        self.assertEqual('k2', k2.body)
        self.ledger.finish(k2, base.EXPIRED, 'HTTP 500', NOW)
        self.assertEqual(['k3'], self.bodies(self.claim()))

    def test_keys_are_ordered_per_subscription(self):
        self.ledger.enqueue(keyed(('k1', 'k'), ('k2', 'k'), subs=['s1', 's2'],
                                  strategy=retry.ZAQAR))
        first = {d.subscription_id: d for d in self.claim()}
        self.assertEqual({'s1': 'k1', 's2': 'k1'},
                         {s: d.body for s, d in first.items()})
        self.ledger.retry(first['s1'], NOW + 100, 'HTTP 500', NOW)
        self.ledger.finish(first['s2'], base.DELIVERED, None, NOW)
        [k2] = self.claim(NOW + 1)
        self.assertEqual(('s2', 'k2'), (k2.subscription_id, k2.body))

    def test_a_failing_key_delays_only_its_own_later_deliveries(self):
        for strategy in (retry.ZAQAR, retry.BACKOFF, retry.EXPONENTIAL_DECAY):
            self.ledger = self.make_ledger()
            self.ledger.enqueue(keyed(('k1', 'k'), ('j1', 'j'), ('u1', None),
                                      ('k2', 'k'), ('j2', 'j'), ('u2', None),
                                      strategy=strategy))
            claimed = {d.body: d for d in self.claim()}
            # Without a key, backoff still goes one at a time.
            unkeyed = ['u1'] if strategy == retry.BACKOFF else ['u1', 'u2']
            self.assertEqual(['j1', 'k1'] + unkeyed, sorted(claimed),
                             strategy)
            self.ledger.retry(claimed.pop('k1'), NOW + 1, 'HTTP 500', NOW)
            for delivery in claimed.values():
                self.ledger.finish(delivery, base.DELIVERED, None, NOW)
            claimed = {d.body: d for d in self.claim(NOW + 1)}
            self.assertEqual(['j2', 'k1'] + ['u1', 'u2'][len(unkeyed):],
                             sorted(claimed), strategy)
            # A second failure: exponential_decay would block a subscriber
            # for a delivery without a key; k only waits for k1.
            self.ledger.retry(claimed.pop('k1'), NOW + 9, 'HTTP 500', NOW + 1)
            for delivery in claimed.values():
                self.ledger.finish(delivery, base.DELIVERED, None, NOW + 1)
            self.ledger.enqueue(keyed(('j3', 'j'), ('k3', 'k'), ('u3', None),
                                      published=NOW + 1, strategy=strategy))
            claimed = self.claim(NOW + 2)
            self.assertEqual(['j3', 'u3'], self.bodies(claimed), strategy)
            [stats] = self.ledger.stats()
            self.assertEqual((5, 1), (stats.pending, stats.retrying),
                             strategy)
            for delivery in claimed:
                self.ledger.finish(delivery, base.DELIVERED, None, NOW + 2)
            self.assertEqual([], self.claim(NOW + 8), strategy)
            # k1 goes (delivered, or dropped after backoff's retries): k2,
            # then k3, follow in order.
            [k1] = self.claim(NOW + 9)
            self.assertEqual('k1', k1.body, strategy)
            self.ledger.finish(k1, base.DROPPED if strategy == retry.BACKOFF
                               else base.DELIVERED, 'HTTP 500', NOW + 9)
            for body in ('k2', 'k3'):
                [delivery] = self.claim(NOW + 9)
                self.assertEqual(body, delivery.body, strategy)
                self.ledger.finish(delivery, base.DELIVERED, None, NOW + 9)
            self.assertIsNone(self.ledger.next_due(), strategy)

    def test_backoff_orders_deliveries_without_a_key_among_themselves(self):
        self.ledger.enqueue(keyed(('u1', None), ('k1', 'k'), ('u2', None),
                                  ('j1', 'j'), strategy=retry.BACKOFF))
        claimed = {d.body: d for d in self.claim()}
        self.assertEqual(['j1', 'k1', 'u1'], sorted(claimed))
        self.ledger.retry(claimed['u1'], NOW + 1, 'HTTP 500', NOW)
        self.ledger.finish(claimed['k1'], base.DELIVERED, None, NOW)
        self.ledger.enqueue(keyed(('k2', 'k'), ('u3', None),
                                  strategy=retry.BACKOFF))
        # u2 and u3 wait behind the retried u1; the key does not.
        self.assertEqual(['k2'], self.bodies(self.claim()))
        for body in ('u1', 'u2', 'u3'):
            [delivery] = self.claim(NOW + 1)
            self.assertEqual(body, delivery.body)
            self.ledger.finish(delivery, base.DELIVERED, None, NOW + 1)

    def test_decay_blocks_deliveries_without_a_key_not_the_keys(self):
        self.ledger.enqueue(keyed(('u1', None), ('u2', None), ('k1', 'k'),
                                  strategy=retry.EXPONENTIAL_DECAY))
        u1, u2, k1 = self.claim()
        self.ledger.retry(u1, NOW + 1, 'HTTP 500', NOW)
        self.ledger.finish(u2, base.DELIVERED, None, NOW)
        self.ledger.finish(k1, base.DELIVERED, None, NOW)
        [u1] = self.claim(NOW + 1)
        self.ledger.retry(u1, NOW + 3, 'HTTP 500', NOW + 1)
        self.ledger.enqueue(keyed(('u3', None), ('k2', 'k'), ('j1', 'j'),
                                  published=NOW + 1,
                                  strategy=retry.EXPONENTIAL_DECAY))
        # u1's failed retry blocks u3, not the keys.
        claimed = self.claim(NOW + 1)
        self.assertEqual(['j1', 'k2'], self.bodies(claimed))
        for delivery in claimed:
            self.ledger.finish(delivery, base.DELIVERED, None, NOW + 1)
        self.assertEqual([], self.claim(NOW + 2))
        [u1] = self.claim(NOW + 3)
        self.ledger.finish(u1, base.DELIVERED, None, NOW + 3)
        self.assertEqual(['u3'], self.bodies(self.claim(NOW + 3)))

    def test_forget_drops_a_subscriptions_keys_not_the_others(self):
        self.ledger.enqueue(keyed(('k1', 'k'), ('k2', 'k'), subs=['s1', 's2'],
                                  strategy=retry.ZAQAR))
        claimed = {d.subscription_id: d for d in self.claim()}
        self.assertEqual(2, self.ledger.forget('p', 'q', 's1'))
        self.assertFalse(self.ledger.finish(claimed['s1'], base.DELIVERED,
                                            None, NOW))
        self.ledger.finish(claimed['s2'], base.DELIVERED, None, NOW)
        [k2] = self.claim()
        self.assertEqual(('s2', 'k2'), (k2.subscription_id, k2.body))

    def test_claimers_never_hold_two_of_a_key_and_finish_keys_in_order(self):
        strategies = (retry.ZAQAR, retry.EXPONENTIAL_DECAY, retry.BACKOFF)
        rand = random.Random(14)
        posted = {}
        for number in range(30):
            strategy = strategies[number % 3]
            pairs = [('%s-%d' % (key, number), key)
                     for key in rand.sample('abcdef', 3)] + [('u', None)]
            for sub in ('s1', 's2'):
                self.ledger.enqueue(keyed(*pairs, sub=sub, strategy=strategy,
                                          published=NOW + number))
                for body, key in pairs:
                    if key:
                        posted.setdefault((sub, key), []).append(body)
        finished = {}
        now = NOW + 30
        for turn in range(2000):
            held = []
            for ledger in self.claimers():
                held += ledger.claim(now, rand.randint(1, 8), LEASE)
            if not held and self.ledger.next_due() is None:
                break
            out = {}
            for delivery in held:
                name = delivery.body.split('-')[0]
                if name == 'u':
                    self.ledger.finish(delivery, base.DELIVERED, None, now)
                    continue
                self.assertNotIn((delivery.subscription_id, name), out)
                out[delivery.subscription_id, name] = delivery
            for (sub, key), delivery in out.items():
                if rand.random() < 0.3:
                    self.assertTrue(self.ledger.retry(
                        delivery, now + 1, 'HTTP 500', now))
                    continue
                self.assertTrue(self.ledger.finish(
                    delivery, rand.choice(base.OUTCOMES), None, now))
                finished.setdefault((sub, key), []).append(delivery.body)
            now += 1
        self.assertEqual(posted, finished)
