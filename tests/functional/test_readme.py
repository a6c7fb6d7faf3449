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

"""The README's examples, run as pasted.

A server is started from the operator guide's zaqar.conf with the
README's own command; then the user guide's settings, its curl and
python-zaqarclient examples and the operator commands run in bash and
Python as they are written. The blocks are the fenced ones after a
``<!-- README test: NAME -->`` line. Only the addresses change: the test's
redis-server and server listen on free ports, and the configuration file
is the test's.
"""

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.functional import base

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
README = os.path.join(ROOT, 'README.md')
#: Seconds an example may take.
TIMEOUT = 120
STATUS = 'README-TEST-STATUS'

_BLOCK = re.compile(r'^[ \t]*<!-- README test: (?P<name>[\w.-]+) -->\n'
                    r'(?P<indent>[ \t]*)```\w*\n(?P<text>.*?)^[ \t]*```$',
                    re.M | re.S)


def readme_blocks():
    """Return {name: text} of the README's marked fenced blocks."""
    with open(README) as readme:
        text = readme.read()
    blocks = {}
    for found in _BLOCK.finditer(text):
        indent = len(found['indent'])
        blocks[found['name']] = ''.join(
            line[indent:] for line in found['text'].splitlines(True))
    return blocks


class TestReadme(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.blocks = readme_blocks()
        cls.workdir = tempfile.mkdtemp(prefix='zaqar-filtering-readme-')
        if not os.environ.get('ZAQAR_FILTERING_KEEP_WORKDIR'):
            cls.addClassCleanup(shutil.rmtree, cls.workdir,
                                ignore_errors=True)
        cls.redis = base.RedisServer(cls.workdir)
        cls.addClassCleanup(cls.redis.stop)
        cls.redis.start()
        cls.port = base.free_port()
        cls.conf_path = os.path.join(cls.workdir, 'zaqar.conf')
        with open(cls.conf_path, 'w') as conf:
            conf.write(cls.local(cls.blocks['zaqar.conf']))
        command = shlex.split(cls.local(cls.blocks['server']))
        command[0] = base.venv_script(command[0])
        cls.server = base.ZaqarServer(
            cls.conf_path, cls.port, os.path.join(cls.workdir, 'zaqar.log'),
            argv=command)
        cls.addClassCleanup(cls.server.stop)
        cls.server.start()

    @classmethod
    def local(cls, text):
        """The README's text with this test's addresses and paths."""
        for readme, here in (('redis://127.0.0.1:6379', cls.redis.uri),
                             ('127.0.0.1:8888', '127.0.0.1:%d' % cls.port),
                             ('port = 8888', 'port = %d' % cls.port),
                             ('/etc/zaqar/zaqar.conf', cls.conf_path)):
            text = text.replace(readme, here)
        return text

    def test_the_blocks_use_the_addresses_replaced_here(self):
        conf = self.blocks['zaqar.conf']
        self.assertIn('uri = redis://127.0.0.1:6379', conf)
        self.assertIn('port = 8888', conf)
        self.assertIn('ZAQAR=http://127.0.0.1:8888\n',
                      self.blocks['variables'])
        self.assertIn("'http://127.0.0.1:8888'", self.blocks['python'])

    def bash(self, *names):
        """Run blocks in one bash; return stdout and the HTTP statuses."""
        tools = os.path.join(self.workdir, 'tools')
        os.makedirs(tools, exist_ok=True)
        curl = os.path.join(tools, 'curl')
        with open(curl, 'w') as wrapper:
            # Every curl call also reports its HTTP status on stderr.
            wrapper.write('#!/bin/sh\nexec %s -w \'%%{stderr}%s '
                          '%%{http_code}\\n\' "$@"\n'
                          % (shutil.which('curl'), STATUS))
        os.chmod(curl, 0o755)
        script = 'set -eo pipefail\n' + '\n'.join(
            self.local(self.blocks[name]) for name in names)
        path = os.pathsep.join([tools, os.path.dirname(sys.executable),
                                os.environ.get('PATH', '')])
        result = subprocess.run(['bash', '-c', script], capture_output=True,
                                text=True, timeout=TIMEOUT,
                                env=dict(os.environ, PATH=path))
        self.assertEqual(0, result.returncode,
                         'stdout:\n%s\nstderr:\n%s\nserver log:\n%s' % (
                             result.stdout, result.stderr,
                             self.server.log_tail()))
        statuses = [int(line.split()[1]) for line in
                    result.stderr.splitlines() if line.startswith(STATUS)]
        return result.stdout, statuses

    def test_user_guide_and_operator_commands_with_curl(self):
        out, statuses = self.bash('variables', 'curl', 'retry-curl',
                                  'deliveries', 'verify')
        self.assertEqual(
            # curl: 4 subscriptions, read back, a message, PATCH, 2 x 400
            [201, 201, 201, 201, 200, 201, 204, 400, 400]
            # retry-curl, deliveries
            + [201, 200], statuses, out)
        self.assertIn("did you mean 'filter_policy' or 'filter_policies'?",
                      out)
        self.assertIn('"tracked": true', out)
        self.assertIn('subscriptions checked: 0 invalid', out)

    def test_user_guide_with_python_zaqarclient(self):
        # A project of its own: the curl examples use the same queue and
        # subscribers, and creating a subscriber again changes nothing.
        code = self.local(self.blocks['python'])
        self.assertIn("'os_project_id': 'demo'", code)
        code = code.replace("'os_project_id': 'demo'",
                            "'os_project_id': 'demo-python'")
        result = subprocess.run(
            [sys.executable, '-c', code],
            capture_output=True, text=True, timeout=TIMEOUT)
        self.assertEqual(0, result.returncode,
                         result.stderr + self.server.log_tail())
        self.assertIn("{'filter_policies': ['order_paid', 'order_placed']}",
                      result.stdout)
        self.assertIn("tag 'abcdefghijklmnopq' has 17 characters; the limit "
                      "is 16", result.stdout)
