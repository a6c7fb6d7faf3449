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

"""The ``zaqar_filtering.validation`` subscription-pipeline stage.

It rejects a subscription whose filter options are invalid with HTTP 400
(Zaqar's ``ValidationFailed``), normalizes valid ones, and tells the
notifier's matcher cache which queue changed.
"""

from oslo_config import cfg
from zaqar.transport import validation

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import opts
from zaqar_filtering.stages import matcher_cache
from zaqar_filtering import validate_options


class ValidationStage:
    """Subscription-pipeline stage; Zaqar builds it with no arguments.

    Every method returns None so that the pipeline goes on to storage.
    """

    def __init__(self, *args, **kwargs):
        opts.register_opts(cfg.CONF)
        self._limits = opts.limits_from_conf(cfg.CONF)

    def create(self, queue, subscriber, ttl, options, project=None):
        self._normalize(options)
        matcher_cache.invalidate(project, queue)

    def update(self, queue, subscription_id, project=None, **kwargs):
        if 'options' in kwargs:
            self._normalize(kwargs['options'])
        matcher_cache.invalidate(project, queue)

    def delete(self, queue, subscription_id, project=None):
        matcher_cache.invalidate(project, queue)

    def confirm(self, queue, subscription_id, project=None, confirmed=True):
        matcher_cache.invalidate(project, queue)

    def _normalize(self, options):
        try:
            normalized = validate_options(options, self._limits)
        except InvalidPolicy as exc:
            # ValidationFailed formats its message: pass the text as an
            # argument so that braces in it survive.
            raise validation.ValidationFailed('{}', str(exc))
        if isinstance(options, dict):
            # The pipeline passes this dict on to storage: the one way to
            # store the normalized form.
            options.clear()
            options.update(normalized)
