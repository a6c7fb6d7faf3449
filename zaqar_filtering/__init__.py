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

"""Subscription filtering for OpenStack Zaqar.

The stable Python API: validate a subscription's filter options or a
message's filter fields, and match messages against many subscriptions.
"""

from zaqar_filtering.index.matcher import Matcher
from zaqar_filtering.policy.errors import InvalidPolicy
from zaqar_filtering.policy.limits import DEFAULT_LIMITS
from zaqar_filtering.policy.limits import Limits
from zaqar_filtering.policy.message import validate_message
from zaqar_filtering.policy.subscription import validate_options

__all__ = ['DEFAULT_LIMITS', 'InvalidPolicy', 'Limits', 'Matcher',
           'validate_message', 'validate_options']
