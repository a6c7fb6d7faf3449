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

"""The one error every policy and message check raises."""


class InvalidPolicy(ValueError):
    """A subscription policy or a message filter field breaks a rule.

    :param option: the subscription option or message field at fault,
        for example ``filter_policies`` or ``attributes``.
    :param rule: a short stable name of the broken rule, for example
        ``tag_length``; reports count errors by it.
    :param detail: what is wrong, naming the offending value and the rule.
    :param path: where in the option's value the fault is, as a tuple of
        keys and list indexes; empty for the option as a whole.
    """

    def __init__(self, option, rule, detail, path=()):
        self.option = option
        self.rule = rule
        self.detail = detail
        self.path = tuple(path)
        super().__init__(str(self))

    @property
    def location(self):
        """The option and path, JSON-pointer style: ``filter_policy/key/0``."""
        return '/'.join([self.option] + [str(p) for p in self.path])

    def __str__(self):
        return '%s: %s' % (self.location, self.detail)

    def __reduce__(self):
        # Spark ships exceptions between processes; keep the attributes.
        return (type(self), (self.option, self.rule, self.detail, self.path))
