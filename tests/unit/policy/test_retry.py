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

"""Notify strategies: validation, which policy applies, and schedules."""

import random
import unittest

from zaqar_filtering import InvalidPolicy
from zaqar_filtering.policy import retry
from zaqar_filtering import validate_options

SETTINGS = retry.RetrySettings()


def delays(schedule, most=200):
    found = []
    rng = random.Random(7)
    for failures in range(1, most + 1):
        delay = schedule.delay(failures, rng)
        if delay is None:
            return found
        found.append(delay)
    return found


class TestValidation(unittest.TestCase):

    def assertInvalid(self, options, rule, *texts):
        with self.assertRaises(InvalidPolicy) as caught:
            validate_options(options)
        self.assertEqual(rule, caught.exception.rule)
        for text in texts:
            self.assertIn(text, str(caught.exception))

    def test_strategies_are_accepted_and_kept(self):
        for strategy in ('backoff', 'exponential_decay'):
            options = {'_retry_policy': {'notify_strategy': strategy,
                                         'ignore_subscription_override': 1}}
            self.assertEqual(options, validate_options(options))

    def test_zaqar_keys_alone_are_left_to_zaqar(self):
        options = {'_retry_policy': {'retries_with_no_delay': 2}}
        self.assertEqual(options, validate_options(options))

    def test_unknown_strategy(self):
        self.assertInvalid(
            {'_retry_policy': {'notify_strategy': 'BACKOFF_RETRY'}},
            'notify_strategy', '_retry_policy/notify_strategy:',
            "'BACKOFF_RETRY' is not a notify strategy",
            'backoff, exponential_decay')
        self.assertInvalid({'_retry_policy': {'notify_strategy': None}},
                           'notify_strategy', 'null')

    def test_strategy_with_zaqar_schedule_keys(self):
        self.assertInvalid(
            {'_retry_policy': {'notify_strategy': 'backoff',
                               'minimum_delay': 3, 'maximum_delay': 40}},
            'notify_strategy_with_schedule',
            'cannot be combined with maximum_delay, minimum_delay')

    def test_retry_policy_must_be_an_object(self):
        self.assertInvalid({'_retry_policy': ['backoff']},
                           'retry_policy_type', '_retry_policy: must be a '
                           'JSON object, not ["backoff"]')


class TestEffectivePolicy(unittest.TestCase):
    SUB = {'notify_strategy': 'backoff'}
    QUEUE = {'notify_strategy': 'exponential_decay'}

    def test_the_subscription_wins_by_default(self):
        self.assertEqual(self.SUB, retry.effective_policy(self.SUB,
                                                          self.QUEUE))
        self.assertEqual(self.QUEUE, retry.effective_policy(None, self.QUEUE))
        self.assertEqual({}, retry.effective_policy(None, None))

    def test_ignore_subscription_override_on_either_side(self):
        queue = dict(self.QUEUE, ignore_subscription_override=True)
        self.assertEqual(queue, retry.effective_policy(self.SUB, queue))
        sub = dict(self.SUB, ignore_subscription_override=True)
        self.assertEqual(self.QUEUE, retry.effective_policy(sub, self.QUEUE))
        self.assertEqual({}, retry.effective_policy(sub, None))

    def test_strategy_of(self):
        self.assertEqual('exponential_decay', retry.strategy_of({}))
        self.assertEqual('backoff', retry.strategy_of(self.SUB))
        self.assertEqual('zaqar', retry.strategy_of({'minimum_delay': 1}))
        self.assertEqual('exponential_decay', retry.strategy_of(
            {'ignore_subscription_override': True}))


class TestSchedules(unittest.TestCase):

    def test_backoff_three_random_retries_then_drop(self):
        schedule = retry.schedule_for(retry.BACKOFF, SETTINGS)
        found = delays(schedule)
        self.assertEqual(3, len(found))
        self.assertTrue(all(10 <= d <= 20 for d in found), found)
        self.assertGreater(len(set(found)), 1)

    def test_exponential_decay_doubles_to_512_until_the_lifecycle(self):
        schedule = retry.schedule_for(retry.EXPONENTIAL_DECAY, SETTINGS)
        found = delays(schedule)
        self.assertEqual(200, len(found))
        self.assertEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 512],
                         found[:11])
        self.assertEqual({512}, set(found[9:]))
        # CMQ: 176 retries fill a day.
        self.assertLessEqual(86400 - sum(found[:176]), 512)

    def test_settings_shorten_the_intervals(self):
        settings = retry.RetrySettings(backoff_retries=1,
                                       backoff_min_seconds=0.1,
                                       backoff_max_seconds=0.1,
                                       decay_first_seconds=0.25,
                                       decay_max_seconds=1)
        self.assertEqual([0.1], delays(retry.schedule_for(
            retry.BACKOFF, settings)))
        self.assertEqual([0.25, 0.5, 1, 1], delays(retry.schedule_for(
            retry.EXPONENTIAL_DECAY, settings), most=4))

    def test_zaqar_defaults_keep_zaqars_schedule(self):
        schedule = retry.schedule_for(retry.ZAQAR, SETTINGS,
                                      {'minimum_delay': 5})
        self.assertEqual([0, 0, 0, 5, 5, 5, 5, 10, 15, 20, 25, 30, 30, 30],
                         delays(schedule))

    def test_zaqar_keys_and_backoff_functions(self):
        policy = {'retries_with_no_delay': 1, 'minimum_delay_retries': 0,
                  'maximum_delay_retries': 1, 'minimum_delay': 10,
                  'maximum_delay': 30}
        for function, expected in [
                ('linear', [10, 15, 20, 25]),
                ('arithmetic', [10, 13, 20, 30]),
                ('geometric', [10, 14, 20, 29]),
                ('exponential', [10, 14, 20, 29])]:
            with self.subTest(function=function):
                found = delays(retry.schedule_for(
                    retry.ZAQAR, SETTINGS,
                    dict(policy, retry_backoff_function=function)))
                self.assertEqual([0] + expected + [30], found)

    def test_no_retries(self):
        schedule = retry.schedule_for(
            retry.ZAQAR, SETTINGS,
            {'retries_with_no_delay': 0, 'minimum_delay_retries': 0,
             'maximum_delay_retries': 0, 'minimum_delay': 5,
             'maximum_delay': 5})
        self.assertEqual([], delays(schedule))
        self.assertRaises(ValueError, schedule.delay, 0, random.Random())

    def test_zaqar_backoff_phases_agree_with_zaqars_own(self):
        from zaqar.notification.tasks import webhook

        for low, high in [(5, 30), (10, 30), (1, 100), (7, 23), (30, 600)]:
            for function, zaqars in webhook.RETRY_BACKOFF_FUNCTION_MAP.items():
                with self.subTest(function=function, low=low, high=high):
                    policy = {'retries_with_no_delay': 0,
                              'minimum_delay_retries': 0,
                              'maximum_delay_retries': 0,
                              'minimum_delay': low, 'maximum_delay': high,
                              'retry_backoff_function': function}
                    self.assertEqual(
                        list(zaqars(low, high, 5)),
                        delays(retry.schedule_for(retry.ZAQAR, SETTINGS,
                                                  policy)))
