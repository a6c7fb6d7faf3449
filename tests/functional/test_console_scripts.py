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

"""The installed console scripts print only their own output.

Every script of setup.cfg is run as installed, in a subprocess.
"""

import configparser
import os
import subprocess
import sys
import unittest

from tests.functional import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
EVENTLET_WARNING = 'Eventlet is deprecated'


def console_scripts():
    """Return {name: entry point} of setup.cfg's console scripts."""
    parser = configparser.ConfigParser()
    parser.read(os.path.join(ROOT, 'setup.cfg'))
    lines = parser['entry_points']['console_scripts'].strip().splitlines()
    return dict(line.replace(' ', '').split('=', 1) for line in lines)


class TestConsoleScripts(unittest.TestCase):

    def test_eventlet_warns_without_the_filter(self):
        # Otherwise the tests below could not fail.
        result = subprocess.run(
            [sys.executable, '-c', 'import zaqar_filtering.server'],
            capture_output=True, text=True, timeout=60)
        if EVENTLET_WARNING not in result.stderr:
            self.skipTest('this eventlet does not warn on import')

    def test_every_script_lives_in_zaqar_filtering_cmd(self):
        scripts = console_scripts()
        self.assertIn('zaqar-filtering-server', scripts)
        for name, target in scripts.items():
            self.assertTrue(target.startswith('zaqar_filtering.cmd.'),
                            '%s = %s' % (name, target))

    def test_help_prints_no_eventlet_warning(self):
        for name in console_scripts():
            with self.subTest(script=name):
                result = subprocess.run(
                    [base.venv_script(name), '--help'],
                    capture_output=True, text=True, timeout=60)
                self.assertEqual(0, result.returncode, result.stderr)
                self.assertIn('usage: ', result.stdout)
                self.assertNotIn(EVENTLET_WARNING, result.stderr)
                self.assertNotIn('EventletDeprecationWarning',
                                 result.stderr)

    def test_other_warnings_still_show(self):
        result = subprocess.run(
            [sys.executable, '-c', 'import zaqar_filtering.cmd, warnings; '
             'warnings.warn("Eventlet-free warning", DeprecationWarning); '
             'warnings.warn("\\nEventlet is deprecated.", UserWarning)'],
            capture_output=True, text=True, timeout=60,
            env=dict(os.environ, PYTHONWARNINGS='default'))
        self.assertIn('Eventlet-free warning', result.stderr)
        self.assertNotIn(EVENTLET_WARNING, result.stderr)
