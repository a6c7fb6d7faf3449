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

"""The [filtering] options: entry point, defaults and limits."""

import unittest

from oslo_config import cfg
from oslo_config import fixture
import stevedore

from zaqar_filtering import DEFAULT_LIMITS
from zaqar_filtering import opts
from zaqar_filtering.policy.retry import RetrySettings


class TestOpts(unittest.TestCase):

    def setUp(self):
        self.conf = cfg.ConfigOpts()
        opts.register_opts(self.conf)
        self.config = fixture.Config(self.conf)
        self.config.setUp()
        self.addCleanup(self.config.cleanUp)

    def test_entry_point_lists_the_options(self):
        manager = stevedore.NamedExtensionManager(
            'oslo.config.opts', names=['zaqar_filtering'],
            invoke_on_load=True)
        [(group, options), (mongodb, mongodb_options),
         (delivery, delivery_options)] = manager['zaqar_filtering'].obj
        self.assertEqual('filtering', group)
        self.assertIs(opts.ALL_OPTS, options)
        self.assertEqual('filtering:mongodb', mongodb)
        self.assertIs(opts.MONGODB_OPTS, mongodb_options)
        self.assertTrue(mongodb_options[0].secret)   # the uri
        self.assertEqual('filtering:delivery', delivery)
        self.assertIs(opts.DELIVERY_LEDGER_OPTS, delivery_options)

    def test_defaults_are_the_default_limits(self):
        self.assertEqual(DEFAULT_LIMITS, opts.limits_from_conf(self.conf))

    def test_limits_follow_the_configuration(self):
        self.config.config(group='filtering', max_tags=2, max_tag_length=3)
        limits = opts.limits_from_conf(self.conf)
        self.assertEqual((2, 3), (limits.max_tags, limits.max_tag_length))

    def test_limits_must_be_positive(self):
        self.assertRaises(ValueError, self.config.config, group='filtering',
                          max_tags=0)

    def test_retry_settings_follow_the_configuration(self):
        self.assertEqual(RetrySettings(),
                         opts.retry_settings_from_conf(self.conf))
        self.config.config(group='filtering:delivery', backoff_retries=5,
                           decay_max_seconds=60)
        settings = opts.retry_settings_from_conf(self.conf)
        self.assertEqual((5, 60), (settings.backoff_retries,
                                   settings.decay_max_seconds))
        self.assertRaises(ValueError, self.config.config,
                          group='filtering:delivery', backoff_retries=-1)

    def test_sample_config_is_up_to_date(self):
        import io
        import pathlib

        from oslo_config import generator

        root = pathlib.Path(__file__).parent.parent.parent
        conf = cfg.ConfigOpts()
        generator.register_cli_opts(conf)
        conf(['--config-file', str(root / 'etc' / 'zaqar-filtering' /
                                   'zaqar-filtering-config-generator.conf')])
        out = io.StringIO()
        generator.generate(conf, out)
        sample = root / 'etc' / 'zaqar-filtering' / \
            'zaqar-filtering.conf.sample'
        self.assertEqual(sample.read_text(), out.getvalue(),
                         'regenerate it: oslo-config-generator --config-file '
                         'etc/zaqar-filtering/'
                         'zaqar-filtering-config-generator.conf')
