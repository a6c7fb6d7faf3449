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

"""Retry policies of webhook deliveries: CMQ's notify strategies.

A subscription (or a queue) picks one in Zaqar's ``_retry_policy`` dict::

    {"_retry_policy": {"notify_strategy": "backoff"}}

- ``exponential_decay`` (the default): retries after 1, 2, 4, ... 512
  seconds, then every 512 seconds, until the message's lifecycle ends.
  Messages go to the subscriber concurrently, but once a retry fails again
  the subscriber's later messages wait for that one (CMQ's blocking).
- ``backoff``: up to 3 retries at random intervals of 10 to 20 seconds,
  then the message is dropped for that subscriber; a subscriber gets its
  messages one at a time, in order.
- A ``_retry_policy`` with Zaqar's own schedule keys (``retries_with_no_
  delay``, ``minimum_delay`` ...) and no ``notify_strategy`` keeps Zaqar's
  schedule: the same retries at the same intervals, then the message is
  dropped.

Which ``_retry_policy`` applies follows Zaqar: the queue's when either
says ``ignore_subscription_override``, else the subscription's, else the
queue's. The intervals are :class:`RetrySettings`, which operators set.
"""

import dataclasses
import math

from zaqar_filtering.policy.errors import InvalidPolicy
from zaqar_filtering.policy import spelling
from zaqar_filtering.policy import values as v

OPTION = '_retry_policy'
STRATEGY = 'notify_strategy'
OVERRIDE = 'ignore_subscription_override'

BACKOFF = 'backoff'
EXPONENTIAL_DECAY = 'exponential_decay'
#: Zaqar's own schedule, from its ``_retry_policy`` keys.
ZAQAR = 'zaqar'
STRATEGIES = (BACKOFF, EXPONENTIAL_DECAY)

#: Zaqar's schedule keys and their defaults (zaqar.common.consts).
ZAQAR_DEFAULTS = {
    'retries_with_no_delay': 3,
    'minimum_delay_retries': 3,
    'minimum_delay': 5,
    'maximum_delay': 30,
    'maximum_delay_retries': 3,
    'retry_backoff_function': 'linear',
}
#: Seconds between the steps of Zaqar's backoff functions.
_ZAQAR_STEP = 5


@dataclasses.dataclass(frozen=True)
class RetrySettings:
    """The intervals of the notify strategies, in seconds."""
    backoff_retries: int = 3
    backoff_min_seconds: float = 10.0
    backoff_max_seconds: float = 20.0
    decay_first_seconds: float = 1.0
    decay_max_seconds: float = 512.0


def validate_retry_policy(policy):
    """Check the ``notify_strategy`` of a ``_retry_policy`` value.

    Zaqar checks its own keys; this checks the one it does not know.

    :raises InvalidPolicy: naming ``_retry_policy/notify_strategy``.
    """
    if policy is None:
        return
    if not isinstance(policy, dict):
        raise InvalidPolicy(OPTION, 'retry_policy_type', 'must be a JSON '
                            'object, not %s' % v.describe(policy))
    spelling.check_names(policy, (STRATEGY,), OPTION, 'option_name')
    if STRATEGY not in policy:
        return
    strategy = policy[STRATEGY]
    if strategy not in STRATEGIES:
        raise InvalidPolicy(
            OPTION, 'notify_strategy', '%s is not a notify strategy; use '
            'one of %s' % (v.describe(strategy), ', '.join(STRATEGIES)),
            path=(STRATEGY,))
    mixed = sorted(key for key in ZAQAR_DEFAULTS if key in policy)
    if mixed:
        raise InvalidPolicy(
            OPTION, 'notify_strategy_with_schedule', 'notify_strategy %s '
            'sets its own schedule and cannot be combined with %s'
            % (strategy, ', '.join(mixed)), path=(STRATEGY,))


def effective_policy(subscription_policy, queue_policy):
    """Return the ``_retry_policy`` that applies, by Zaqar's rule."""
    subscription_policy = subscription_policy or {}
    queue_policy = queue_policy or {}
    if subscription_policy.get(OVERRIDE) or queue_policy.get(OVERRIDE):
        return queue_policy
    return subscription_policy or queue_policy


def strategy_of(policy):
    """Return the strategy name an effective ``_retry_policy`` selects."""
    policy = policy or {}
    strategy = policy.get(STRATEGY)
    if strategy in STRATEGIES:
        return strategy
    if any(key in policy for key in ZAQAR_DEFAULTS):
        return ZAQAR
    return EXPONENTIAL_DECAY


@dataclasses.dataclass(frozen=True)
class Schedule:
    """When a failed delivery is tried again.

    (The order rules of the strategies, one message at a time for
    ``backoff`` and blocking for ``exponential_decay``, are the delivery
    ledger's: it keeps them by strategy name, and for messages with an
    ordering key keeps each key's order instead.)

    :ivar delays: seconds before each retry; ``None`` as the last item
        means the last delay repeats until the lifecycle ends.
    :ivar jitter: a retry waits between its delay and ``delay + jitter``.
    """
    delays: tuple = ()
    jitter: float = 0.0

    def delay(self, failures, random):
        """Return seconds to wait after the ``failures``-th failed attempt.

        :param random: a ``random.Random``-like source, for the jitter.
        :returns: None when the message is to be dropped.
        """
        if failures < 1:
            raise ValueError('failures must be 1 or more')
        delays = self.delays
        if delays and delays[-1] is None:
            base = delays[min(failures, len(delays) - 1) - 1]
        elif failures <= len(delays):
            base = delays[failures - 1]
        else:
            return None
        return base + (random.uniform(0, self.jitter) if self.jitter else 0)


def schedule_for(strategy, settings, policy=None):
    """Return the :class:`Schedule` of a strategy (see :func:`strategy_of`).

    :param policy: the effective ``_retry_policy``, for Zaqar's schedule.
    """
    if strategy == BACKOFF:
        return Schedule(delays=(settings.backoff_min_seconds,)
                        * settings.backoff_retries,
                        jitter=settings.backoff_max_seconds
                        - settings.backoff_min_seconds)
    if strategy == EXPONENTIAL_DECAY:
        delays = []
        delay = settings.decay_first_seconds
        while delay < settings.decay_max_seconds:
            delays.append(delay)
            delay *= 2
        delays.append(settings.decay_max_seconds)
        return Schedule(delays=tuple(delays) + (None,))
    return Schedule(delays=tuple(_zaqar_delays(policy or {})))


def _zaqar_delays(policy):
    """Zaqar's webhook schedule: no delay, minimum, backoff, maximum."""
    get = {key: policy.get(key, default)
           for key, default in ZAQAR_DEFAULTS.items()}.get
    low, high = get('minimum_delay'), get('maximum_delay')
    delays = [0] * get('retries_with_no_delay')
    delays += [low] * get('minimum_delay_retries')
    delays += _backoff(get('retry_backoff_function'), low, high)
    delays += [high] * get('maximum_delay_retries')
    return delays


def _backoff(function, low, high):
    """The delays of Zaqar's backoff phase between ``low`` and ``high``."""
    if function == 'linear' or low <= 0 or high <= low:
        return list(range(low, high, _ZAQAR_STEP))
    steps = int((high - low) / _ZAQAR_STEP)
    if steps < 2:
        return list(range(low, high, _ZAQAR_STEP))
    if function == 'arithmetic':
        gap = 2.0 * (high - low) / (steps * (steps - 1))
        return [int(low + (i - 1) * i * gap / 2) for i in range(1, steps + 1)]
    ratio = math.pow(high / low, 1.0 / (steps - 1))
    if function == 'geometric':
        return [int(low * math.pow(ratio, i - 1)) for i in range(1, steps + 1)]
    # exponential
    return [int(low / ratio * math.pow(ratio, i)) for i in range(1, steps + 1)]
