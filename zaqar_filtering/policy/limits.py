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

"""Size limits of policies and message filter fields."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Limits:
    """Limits that policies and message filter fields must keep.

    The defaults are those of Tencent CMQ (tags, binding keys) and Amazon
    SNS (filter policies). Operators change them through configuration.
    """

    #: Tags per subscription and per message.
    max_tags: int = 5
    #: Characters per tag.
    max_tag_length: int = 16
    #: Binding keys per subscription.
    max_binding_keys: int = 5
    #: UTF-8 bytes per binding key and per routing key.
    max_key_bytes: int = 64
    #: Dot-separated words per binding key and per routing key.
    max_key_words: int = 16
    #: Distinct attribute names (leaf keys) in one filter policy.
    max_policy_keys: int = 5
    #: Value combinations of one filter policy, counted as SNS does.
    max_policy_combinations: int = 150
    #: Size of one filter policy, as compact UTF-8 JSON.
    max_policy_bytes: int = 256 * 1024
    #: Largest absolute value of a number in a filter policy.
    max_policy_number: int = 10 ** 9
    #: Digits after the decimal point of a number in a filter policy.
    max_policy_decimals: int = 5
    #: Characters in a message's ordering key (EMQ's TopicQueue topic).
    max_ordering_key_length: int = 128

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if type(value) is not int or value < 1:
                raise ValueError('limit %s must be a positive integer, not %r'
                                 % (field.name, value))


DEFAULT_LIMITS = Limits()
