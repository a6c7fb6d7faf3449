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

"""The field-keeping pieces of the messages resource, without a server."""

import io
import json
import unittest
from unittest import mock

from zaqar.transport import validation

from zaqar_filtering.api import messages
from zaqar_filtering import Limits


def raw(*posted):
    return json.dumps({'messages': list(posted)}).encode()


class TestFilterFields(unittest.TestCase):

    def test_fields_per_message_in_order(self):
        fields = messages.filter_fields(raw(
            {'body': 1, 'filter_policies': ['b', 'a', 'b']},
            {'body': 2},
            {'body': 3, 'routing_key': 'a.b', 'attributes': {'x': 1},
             'ttl': 60, 'delay': 0}))
        self.assertEqual(
            [{'filter_policies': ['a', 'b']}, {},
             {'routing_key': 'a.b', 'attributes': {'x': 1}}],
            fields)

    def test_invalid_field_names_the_message(self):
        with self.assertRaises(validation.ValidationFailed) as caught:
            messages.filter_fields(raw(
                {'body': 1}, {'body': 2, 'filter_policies': ['{}' * 9]}))
        self.assertEqual(
            "messages[1]: filter_policies: tag '%s' has 18 characters; "
            "the limit is 16" % ('{}' * 9), str(caught.exception))

    def test_limits_apply(self):
        self.assertRaises(
            validation.ValidationFailed, messages.filter_fields,
            raw({'body': 1, 'filter_policies': ['a', 'b']}),
            Limits(max_tags=1))


class TestFieldKeepingController(unittest.TestCase):

    def setUp(self):
        self.inner = mock.Mock()
        self.controller = messages.FieldKeepingController(self.inner)

    def post_with_body(self, body, sanitized):
        stream = messages._RecordingStream(io.BytesIO(body))
        stream.read(len(body))
        token = messages._CURRENT_BODY.set(stream)
        try:
            return self.controller.post('q', sanitized, 'uuid',
                                        project='p')
        finally:
            messages._CURRENT_BODY.reset(token)

    def test_fields_are_added_to_copies(self):
        sanitized = [{'ttl': 60, 'body': 1}, {'ttl': 60, 'body': 2}]
        self.post_with_body(
            raw({'body': 1, 'routing_key': 'k'}, {'body': 2}), sanitized)
        self.inner.post.assert_called_once_with(
            'q', messages=[{'ttl': 60, 'body': 1, 'routing_key': 'k'},
                           {'ttl': 60, 'body': 2}],
            client_uuid='uuid', project='p')
        self.assertEqual([{'ttl': 60, 'body': 1}, {'ttl': 60, 'body': 2}],
                         sanitized)

    def test_invalid_field_stops_the_post(self):
        self.assertRaises(
            validation.ValidationFailed, self.post_with_body,
            raw({'body': 1, 'routing_key': '#'}), [{'ttl': 60, 'body': 1}])
        self.inner.post.assert_not_called()

    def test_outside_a_request_posts_unchanged(self):
        sanitized = [{'ttl': 60, 'body': 1}]
        self.controller.post('q', sanitized, 'uuid', project='p')
        self.inner.post.assert_called_once_with(
            'q', messages=sanitized, client_uuid='uuid', project='p')

    def test_other_methods_are_the_controllers(self):
        self.assertIs(self.inner.list, self.controller.list)
