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

"""Zaqar's request validator, with the plugin's subscribers and queue flags.

Zaqar checks a subscriber's URI scheme against ``[transport]
subscriber_types``; a ``queue:NAME`` subscriber is the plugin's own and is
accepted whatever that list says. Its name is checked by the subscription
stage (:mod:`zaqar_filtering.stages.validation`). Queue metadata may set
``_ordered_by_key`` (:mod:`zaqar_filtering.api.ordering`).
"""

from zaqar.transport import validation

from zaqar_filtering.api import ordering
from zaqar_filtering.stages import queue_task


class Validator(ordering.QueueMetadataValidation, validation.Validator):
    """Zaqar's validator; ``queue:`` subscribers skip the scheme list."""

    def subscription_patching(self, subscription):
        if (isinstance(subscription, dict)
                and queue_task.is_queue_subscriber(
                    subscription.get('subscriber'))):
            rest = {k: v for k, v in subscription.items()
                    if k != 'subscriber'}
            if not rest:
                return
            subscription = rest
        super().subscription_patching(subscription)
