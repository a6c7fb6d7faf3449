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

"""The demo shows the CMQ seed results."""

import contextlib
import io
import unittest

from zaqar_filtering import demo


class TestDemo(unittest.TestCase):

    def test_tag_scenario(self):
        self.assertEqual([('A', 'apple', 100, 0), ('B', 'xiaomi', 0, 0),
                          ('C', 'imac+xiaomi', 100, 0), ('D', '-', 100, 1)],
                         demo.tag_scenario())

    def test_routing_scenario(self):
        self.assertEqual([('E', '1.*.0', ['yes', 'no', 'no', 'no']),
                          ('F', '1.#.0', ['yes', 'yes', 'yes', 'no']),
                          ('G', '#', ['yes', 'yes', 'yes', 'yes'])],
                         demo.routing_scenario())

    def test_main_prints_the_tables_and_errors(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            demo.main()
        text = out.getvalue()
        self.assertRegex(text, r'A\s+apple\s+100\s+0\n')
        self.assertRegex(text, r'D\s+-\s+100\s+1\n')
        self.assertIn("filter_policies: tag 'abcdefghijklmnopq' has 17 "
                      "characters; the limit is 16", text)
