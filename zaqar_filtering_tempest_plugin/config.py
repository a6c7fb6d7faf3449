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

"""Tempest options of the zaqar-filtering plugin.

The messaging service itself is configured in zaqar-tempest-plugin's
``[messaging]`` group (``catalog_type``), which this plugin reuses.
"""

from oslo_config import cfg

service_option = cfg.BoolOpt(
    'zaqar_filtering', default=True,
    help='Whether the Zaqar under test runs the zaqar-filtering plugin '
         '(its notifier and validation stages and zaqar-filtering-server '
         'or its WSGI application).')

filtering_group = cfg.OptGroup(
    name='messaging_filtering', title='Zaqar subscription filtering')

FilteringGroup = [
    cfg.IntOpt('delivery_timeout', default=30, min=1,
               help='Seconds to wait for the notifications a filtered '
                    'post should deliver to trust+ subscriptions.'),
    cfg.FloatOpt('delivery_settle', default=2.0, min=0,
                 help='Seconds to keep waiting after the expected '
                      'notifications arrived, so that an unexpected one '
                      'would show up too.'),
    cfg.IntOpt('max_tags', default=5, min=1,
               help='[filtering] max_tags of the Zaqar under test.'),
    cfg.IntOpt('max_tag_length', default=16, min=1,
               help='[filtering] max_tag_length of the Zaqar under test.'),
    cfg.IntOpt('max_binding_keys', default=5, min=1,
               help='[filtering] max_binding_keys of the Zaqar under test.'),
    cfg.IntOpt('max_key_bytes', default=64, min=1,
               help='[filtering] max_key_bytes of the Zaqar under test.'),
    cfg.IntOpt('max_key_words', default=16, min=1,
               help='[filtering] max_key_words of the Zaqar under test.'),
    cfg.IntOpt('max_policy_keys', default=5, min=1,
               help='[filtering] max_policy_keys of the Zaqar under test.'),
]
