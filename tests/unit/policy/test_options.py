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

"""validate_options: normalization and the options it leaves alone."""

import copy
import unittest

from zaqar_filtering import InvalidPolicy
from zaqar_filtering import validate_options


class TestValidateOptions(unittest.TestCase):

    def test_other_options_are_kept_and_input_untouched(self):
        options = {'_retry_policy': {'retries_with_no_delay': 3},
                   'post_data': {'a': 1},
                   'filter_policies': ['b', 'a'],
                   'binding_keys': ['x.#', 'a.*', 'x.#'],
                   'filter_policy': {'k': ['v']},
                   'filter_policy_scope': 'MessageAttributes'}
        before = copy.deepcopy(options)
        self.assertEqual(
            {'_retry_policy': {'retries_with_no_delay': 3},
             'post_data': {'a': 1}, 'filter_policies': ['a', 'b'],
             'binding_keys': ['a.*', 'x.#'], 'filter_policy': {'k': ['v']},
             'filter_policy_scope': 'MessageAttributes'},
            validate_options(options))
        self.assertEqual(before, options)

    def test_no_options(self):
        self.assertEqual({}, validate_options(None))
        self.assertEqual({}, validate_options({}))
        self.assertEqual({'filter_policy_scope': 'MessageBody'},
                         validate_options({'filter_policy_scope':
                                           'MessageBody'}))

    def test_empty_filters_are_dropped(self):
        self.assertEqual({'x': 1}, validate_options(
            {'x': 1, 'filter_policies': [], 'binding_keys': None,
             'filter_policy': {}}))

    def test_options_must_be_an_object(self):
        with self.assertRaises(InvalidPolicy) as caught:
            validate_options(['filter_policies'])
        self.assertEqual('options: must be a JSON object, not '
                         '["filter_policies"]', str(caught.exception))

    def test_error_is_a_value_error_and_pickles(self):
        import pickle
        with self.assertRaises(ValueError) as caught:
            validate_options({'filter_policy': {'k': [{'prefix': 1}]}})
        copied = pickle.loads(pickle.dumps(caught.exception))
        self.assertEqual(str(caught.exception), str(copied))
        self.assertEqual(('k', 0, 'prefix'), copied.path)
        self.assertEqual('pattern_type', copied.rule)
        self.assertEqual('filter_policy/k/0/prefix', copied.location)
