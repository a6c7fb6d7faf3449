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

"""What every queue version store does with its change log, as a mixin.

A test class mixes it into ``unittest.TestCase`` and defines
``make_versions()``, returning empty versions (RedisVersions or
MongoVersions).
"""

from zaqar_filtering.store import versions


class VersionsContract:

    def make_versions(self):
        raise NotImplementedError

    def setUp(self):
        super().setUp()
        self.versions = self.make_versions()

    def test_changes_after_a_move(self):
        self.assertEqual(versions.Changes(versions.Version(0, 0), []),
                         self.versions.changes('p', 'q', 0))
        self.assertEqual(1, self.versions.start('p', 'q', [{'id': 'a'}]))
        self.assertEqual(2, self.versions.start('p', 'q', None))
        self.versions.land('p', 'q', 1)
        self.assertEqual(versions.Changes(versions.Version(2, 1), [
            (1, [{'id': 'a'}]), (2, None)]),
            self.versions.changes('p', 'q', 0))
        self.assertEqual([(2, None)],
                         self.versions.changes('p', 'q', 1).entries)
        self.assertEqual([], self.versions.changes('p', 'q', 2).entries)
        self.assertEqual([], self.versions.changes(None, 'q', 0).entries)

    def test_a_log_that_no_longer_reaches_back_is_none(self):
        for number in range(versions.LOG_LENGTH + 2):
            self.versions.land('p', 'q', self.versions.start(
                'p', 'q', [{'id': str(number)}]))
        self.assertIsNone(self.versions.changes('p', 'q', 1))
        changes = self.versions.changes('p', 'q', 2)
        self.assertEqual(versions.LOG_LENGTH, len(changes.entries))
        self.assertEqual((versions.LOG_LENGTH + 2,
                          [{'id': str(versions.LOG_LENGTH + 1)}]),
                         changes.entries[-1])
