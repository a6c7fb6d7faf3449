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

"""tools/tempest_run.py without servers: its stream and its configuration.

The run itself is part of ``make test``; these check that what it reports
cannot hide a suite that did not run or services that did not start.
"""

import configparser
import importlib.util
import os
import re
import shutil
import tempfile
import unittest

import subunit
import testtools

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def _load():
    spec = importlib.util.spec_from_file_location(
        'tempest_run', os.path.join(ROOT, 'tools', 'tempest_run.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tempest_run = _load()


def write_stream(path, results):
    with open(path, 'ab') as out:
        stream = subunit.StreamResultToBytes(out)
        for test_id, status in results:
            stream.status(test_id=test_id, test_status='inprogress')
            stream.status(test_id=test_id, test_status=status)


def read_stream(path):
    summary = testtools.StreamSummary()
    with open(path, 'rb') as stream:
        summary.startTestRun()
        subunit.ByteStreamToStreamResult(stream).run(summary)
        summary.stopTestRun()
    return summary


class TestTempestRun(unittest.TestCase):

    def setUp(self):
        super().setUp()
        self.work = tempfile.mkdtemp(prefix='zaqar-filtering-tempest-unit-')
        self.addCleanup(shutil.rmtree, self.work, ignore_errors=True)
        self.stream = os.path.join(self.work, 'tempest.subunit')
        open(self.stream, 'wb').close()

    def test_regex_selects_both_suites_only(self):
        regex = re.compile(tempest_run.TEST_REGEX)
        self.assertTrue(regex.match(
            'zaqar_filtering_tempest_plugin.tests.api.test_delivery.'
            'TestFilteredDelivery.test_tags[id-1]'))
        self.assertTrue(regex.match(
            'zaqar_tempest_plugin.tests.v2.test_queues.TestQueues.'
            'test_create_delete_queue[id-2]'))
        self.assertFalse(regex.match(
            'zaqar_tempest_plugin.tests.v1_1.test_queues.TestQueues.x'))
        self.assertFalse(regex.match('tempest.api.identity.x'))

    def test_suite_counts(self):
        write_stream(self.stream, [
            ('zaqar_filtering_tempest_plugin.tests.api.a.T.test_1', 'success'),
            ('zaqar_filtering_tempest_plugin.tests.api.a.T.test_2', 'skip'),
            ('zaqar_tempest_plugin.tests.v2.test_q.T.test_3', 'fail'),
        ])
        self.assertEqual({'zaqar_filtering_tempest_plugin': 2,
                          'zaqar-tempest-plugin v2': 1},
                         tempest_run.suite_counts(self.stream))

    def test_empty_stream_counts_nothing(self):
        self.assertEqual({'zaqar_filtering_tempest_plugin': 0,
                          'zaqar-tempest-plugin v2': 0},
                         tempest_run.suite_counts(self.stream))

    def test_failure_is_counted_as_a_failed_test(self):
        write_stream(self.stream, [
            ('zaqar_tempest_plugin.tests.v2.test_q.T.test_1', 'success')])
        tempest_run.append_failure(self.stream, 'start_keystone',
                                   'Keystone did not start')
        summary = read_stream(self.stream)
        self.assertEqual(2, summary.testsRun)
        # testtools files failed stream tests under errors.
        self.assertFalse(summary.wasSuccessful())
        [(case, text)] = summary.failures + summary.errors
        self.assertEqual('tools.tempest_run.start_keystone', case.id())
        self.assertIn('Keystone did not start', text)

    def test_tempest_conf(self):
        path = tempest_run.write_tempest_conf(
            os.path.join(self.work, 'tempest.conf'), self.work,
            'http://127.0.0.1:5000/v3')
        conf = configparser.RawConfigParser(default_section='none')
        conf.read(path)
        self.assertEqual('True', conf.get('auth', 'use_dynamic_credentials'))
        self.assertEqual('http://127.0.0.1:5000/v3',
                         conf.get('identity', 'uri_v3'))
        self.assertEqual('v3', conf.get('identity', 'auth_version'))
        self.assertEqual('messaging',
                         conf.get('messaging', 'catalog_type'))
        available = dict(conf.items('service_available'))
        self.assertEqual('True', available.pop('zaqar'))
        self.assertEqual('True', available.pop('zaqar_filtering'))
        self.assertEqual({'False'}, set(available.values()))

    def test_zaqar_runs_the_plugin_behind_keystone(self):
        overrides = tempest_run.zaqar_overrides('http://127.0.0.1:5000/v3')
        self.assertEqual('keystone', overrides['DEFAULT']['auth_strategy'])
        self.assertEqual({'message_pipeline': 'zaqar_filtering.notifier, '
                                              'zaqar_filtering.ordering',
                          'subscription_pipeline':
                              'zaqar_filtering.validation',
                          'claim_pipeline': 'zaqar_filtering.ordering'},
                         overrides['storage'])
        self.assertEqual('True', overrides['keystone_authtoken'][
            'service_token_roles_required'])
        self.assertEqual('zaqar', overrides['trustee']['username'])
        self.assertTrue(overrides['signed_url']['secret_key'])
