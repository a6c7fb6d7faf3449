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

"""Tests of zaqar-filtering-export's lines, with a fake Zaqar driver."""

import json
from unittest import mock

from oslo_config import cfg
import testtools

from zaqar_filtering.cmd import export


class ExportLinesTest(testtools.TestCase):

    def test_one_line_per_subscription_with_ttl_left(self):
        drivers = mock.Mock()
        sub = {'id': 'abc', 'subscriber': 'http://x', 'ttl': 100,
               'age': 40, 'options': {'filter_policies': ['a']}}
        # No topics here; tests.functional.test_manage exports some.
        with mock.patch.object(export.topic_store, 'available',
                               return_value=None), \
                mock.patch.object(export.zaqar_storage, 'all_projects',
                                  return_value=['p1']), \
                mock.patch.object(export.zaqar_storage, 'list_queues',
                                  return_value=['q']), \
                mock.patch.object(export.zaqar_storage,
                                  'list_subscriptions',
                                  return_value=[sub]):
            lines = list(export.export_lines(cfg.ConfigOpts(), drivers))
        self.assertEqual([{'id': 'abc', 'source': 'q',
                           'subscriber': 'http://x', 'ttl': 60,
                           'options': {'filter_policies': ['a']},
                           'project': 'p1'}],
                         [json.loads(line) for line in lines])
