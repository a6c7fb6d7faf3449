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

"""The tempest plugin of zaqar-filtering (``tempest.test_plugins``)."""

import os

from tempest import config
from tempest.test_discover import plugins
from zaqar_tempest_plugin import config as zaqar_config

from zaqar_filtering_tempest_plugin import config as filtering_config


class ZaqarFilteringTempestPlugin(plugins.TempestPlugin):
    """API tests of Zaqar's subscription filtering policies."""

    def load_tests(self):
        base_path = os.path.split(os.path.dirname(
            os.path.abspath(__file__)))[0]
        test_dir = 'zaqar_filtering_tempest_plugin/tests'
        return os.path.join(base_path, test_dir), base_path

    def register_opts(self, conf):
        # [messaging] belongs to zaqar-tempest-plugin; registering the same
        # options again is a no-op, and keeps this plugin usable alone.
        config.register_opt_group(conf, config.service_available_group,
                                  [zaqar_config.service_option,
                                   filtering_config.service_option])
        config.register_opt_group(conf, zaqar_config.messaging_group,
                                  zaqar_config.MessagingGroup)
        config.register_opt_group(conf, filtering_config.filtering_group,
                                  filtering_config.FilteringGroup)

    def get_opt_lists(self):
        return [
            (filtering_config.filtering_group.name,
             filtering_config.FilteringGroup),
            (config.service_available_group.name,
             [filtering_config.service_option]),
        ]
