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

"""The core stays pure: policy/ and index/ import only the standard library
and each other, and importing the package loads no Zaqar, oslo, pymongo,
falcon or Spark."""

import ast
import pathlib
import subprocess
import sys
import unittest

import zaqar_filtering

PACKAGE = pathlib.Path(zaqar_filtering.__file__).parent
CORE = ('policy', 'index')
FORBIDDEN = ('zaqar', 'oslo_config', 'oslo_log', 'oslo_utils', 'pymongo',
             'falcon', 'pyspark', 'requests', 'stevedore')
IO_MODULES = ('socket', 'subprocess', 'urllib', 'http', 'shutil', 'io',
              'os', 'pathlib', 'logging', 'threading', 'time')


def imported_modules(path):
    tree = ast.parse(path.read_text('utf-8'))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module


class TestPurity(unittest.TestCase):

    def test_core_imports_only_stdlib_without_io(self):
        files = [f for area in CORE for f in (PACKAGE / area).glob('*.py')]
        self.assertGreater(len(files), 8)
        for path in files:
            for module in imported_modules(path):
                top = module.split('.')[0]
                with self.subTest(file=path.name, module=module):
                    if top == 'zaqar_filtering':
                        self.assertIn(module.split('.')[1], CORE)
                    else:
                        self.assertIn(top, sys.stdlib_module_names)
                        self.assertNotIn(top, IO_MODULES)

    def test_import_loads_no_service_library(self):
        code = ('import sys, zaqar_filtering; '
                'print(",".join(sorted(m for m in sys.modules '
                'if m.split(".")[0] in %r)))' % (FORBIDDEN,))
        loaded = subprocess.run([sys.executable, '-c', code], check=True,
                                capture_output=True, text=True).stdout
        self.assertEqual('', loaded.strip())
