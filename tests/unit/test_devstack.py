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

"""devstack/plugin.sh, run by bash with DevStack's functions stubbed.

DevStack itself cannot run here; what the plugin writes can be checked:
``settings`` and ``plugin.sh`` are sourced as DevStack sources them
(``source plugin.sh stack <phase>``), with ``iniset`` and ``inidelete``
editing real files in a temporary directory and the other functions
recording their calls.
"""

import configparser
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DEVSTACK = os.path.join(ROOT, 'devstack')

# iniset/inidelete as DevStack's inc/ini-config does them, on real files.
INI_TOOL = textwrap.dedent('''\
    import configparser, sys
    command, path, section, option = sys.argv[1:5]
    conf = configparser.RawConfigParser()
    conf.optionxform = str
    conf.read(path)
    if command == 'set':
        if not conf.has_section(section):
            conf.add_section(section)
        conf.set(section, option, sys.argv[5])
    elif conf.has_section(section):
        conf.remove_option(section, option)
    with open(path, 'w') as f:
        conf.write(f)
    ''')

STUBS = textwrap.dedent('''\
    set -e
    calls="$WORK/calls"
    function iniset { "$PYTHON" "$WORK/ini.py" set "$@"; }
    function inidelete { "$PYTHON" "$WORK/ini.py" delete "$@"; }
    function is_service_enabled {
        local service
        for service in "$@"; do
            [[ ",$ENABLED_SERVICES," == *",$service,"* ]] && return 0
        done
        return 1
    }
    function enable_service { ENABLED_SERVICES+=",$1"; }
    function trueorfalse {
        local default=$1 value=${!2:-$1}
        case "$value" in
            [Tt]rue|1|[Yy]es) echo True ;;
            [Ff]alse|0|[Nn]o) echo False ;;
            *) echo "$default" ;;
        esac
    }
    function setup_develop { echo "setup_develop $*" >> "$calls"; }
    function echo_summary { echo "summary $*" >> "$calls"; }
    DEST="$WORK/opt"
    ZAQAR_CONF_DIR="$WORK/etc"
    TEMPEST_CONFIG="$WORK/tempest.conf"
    ''')


class TestDevstackPlugin(unittest.TestCase):

    def setUp(self):
        super().setUp()
        self.work = tempfile.mkdtemp(prefix='zaqar-filtering-devstack-')
        self.addCleanup(shutil.rmtree, self.work, ignore_errors=True)
        with open(os.path.join(self.work, 'ini.py'), 'w') as f:
            f.write(INI_TOOL)
        os.makedirs(os.path.join(self.work, 'etc'))
        # What Zaqar's own plugin wrote in its post-config phase.
        self.write('etc/zaqar.conf', textwrap.dedent('''\
            [DEFAULT]
            auth_strategy = keystone

            [storage]
            message_pipeline = zaqar.notification.notifier
            '''))
        self.write('etc/uwsgi.conf', textwrap.dedent('''\
            [uwsgi]
            http = 127.0.0.1:8888
            wsgi-file = /opt/stack/zaqar/zaqar/transport/wsgi/app.py
            callable = app
            master = true
            '''))

    def write(self, name, text):
        with open(os.path.join(self.work, name), 'w') as f:
            f.write(text)

    def run_phases(self, *phases, env=None, services='zaqar-wsgi'):
        script = STUBS + 'ENABLED_SERVICES=%s\n' % services
        script += 'source "%s/settings"\n' % DEVSTACK
        for phase in phases:
            script += 'source "%s/plugin.sh" %s\n' % (DEVSTACK, phase)
        result = subprocess.run(
            ['bash', '-c', script], capture_output=True, text=True,
            env=dict(os.environ, WORK=self.work, PYTHON=sys.executable,
                     **(env or {})))
        self.assertEqual(0, result.returncode, result.stderr)
        try:
            with open(os.path.join(self.work, 'calls')) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def read(self, name):
        conf = configparser.RawConfigParser()
        conf.optionxform = str
        conf.read(os.path.join(self.work, name))
        return conf

    def test_install(self):
        calls = self.run_phases('stack install')
        self.assertEqual(['summary Installing zaqar-filtering',
                          'setup_develop %s/opt/zaqar-filtering'
                          % self.work], calls)

    def test_post_config_sets_the_pipelines(self):
        self.run_phases('stack post-config')
        conf = self.read('etc/zaqar.conf')
        self.assertEqual('zaqar_filtering.notifier,zaqar_filtering.ordering',
                         conf.get('storage', 'message_pipeline'))
        self.assertEqual('zaqar_filtering.validation',
                         conf.get('storage', 'subscription_pipeline'))
        self.assertEqual('zaqar_filtering.ordering',
                         conf.get('storage', 'claim_pipeline'))
        self.assertEqual('subscriptions',
                         conf.get('filtering', 'policy_store'))
        self.assertFalse(conf.has_section('filtering:mongodb'))
        # Zaqar's own settings stay.
        self.assertEqual('keystone', conf.get('DEFAULT', 'auth_strategy'))

    def test_post_config_serves_the_filtering_wsgi_app(self):
        self.run_phases('stack post-config')
        uwsgi = dict(self.read('etc/uwsgi.conf').items('uwsgi'))
        self.assertEqual({
            'http': '127.0.0.1:8888',
            'master': 'true',
            'module': 'zaqar_filtering.wsgi:application',
            'env': 'ZAQAR_FILTERING_CONFIG_FILES=%s/etc/zaqar.conf'
                   % self.work,
        }, uwsgi)

    def test_wsgi_left_alone_when_disabled(self):
        self.run_phases('stack post-config',
                        env={'ZAQAR_FILTERING_WSGI': 'False'})
        uwsgi = dict(self.read('etc/uwsgi.conf').items('uwsgi'))
        self.assertEqual('app', uwsgi['callable'])
        self.assertNotIn('module', uwsgi)

    def test_mongodb_store(self):
        self.run_phases('stack post-config', env={
            'ZAQAR_FILTERING_POLICY_STORE': 'mongodb',
            'ZAQAR_FILTERING_MONGODB_URI': 'mongodb://db1:27017'})
        conf = self.read('etc/zaqar.conf')
        self.assertEqual('mongodb', conf.get('filtering', 'policy_store'))
        self.assertEqual('mongodb://db1:27017',
                         conf.get('filtering:mongodb', 'uri'))

    def test_the_written_config_loads_in_zaqar(self):
        # The stage names resolve and the options parse.
        from oslo_config import cfg
        import stevedore

        from zaqar_filtering import opts

        self.run_phases('stack post-config')
        conf = cfg.ConfigOpts()
        conf.register_opts(opts.ALL_OPTS, group=opts.GROUP_NAME)
        conf(args=[], default_config_files=[
            os.path.join(self.work, 'etc/zaqar.conf')])
        self.assertEqual('subscriptions', conf.filtering.policy_store)
        zaqar_conf = self.read('etc/zaqar.conf')
        manager = stevedore.ExtensionManager('zaqar.storage.stages',
                                             invoke_on_load=False)
        for option in ('message_pipeline', 'subscription_pipeline',
                       'claim_pipeline'):
            for name in zaqar_conf.get('storage', option).split(','):
                self.assertIn(name, manager.names())

    def test_test_config_enables_the_tempest_plugin(self):
        self.run_phases('stack test-config', services='zaqar-wsgi,tempest')
        conf = self.read('tempest.conf')
        self.assertEqual('True',
                         conf.get('service_available', 'zaqar_filtering'))

    def test_other_phases_do_nothing(self):
        calls = self.run_phases('stack pre-install', 'stack extra',
                                'unstack', 'clean')
        self.assertEqual([], calls)
        self.assertFalse(os.path.exists(os.path.join(self.work,
                                                     'tempest.conf')))
