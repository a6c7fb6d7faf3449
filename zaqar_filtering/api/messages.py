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

"""``POST /v2/queues/{queue_name}/messages`` with the filter fields kept.

Zaqar's resource sanitizes each posted message down to ``ttl``, ``body``
(and ``delay``) before it calls ``message_controller.post``. Rather than
copy its ``on_post``, :class:`MessagesResource` lets it run unchanged (ACL,
queue lazy creation, size limits, JSON parsing, ``ttl`` and ``delay``
checks, encryption) and only:

* keeps a copy of the request body as Zaqar reads it, and
* hands Zaqar a message controller proxy whose ``post`` reads the filter
  fields of each message from that copy, validates them and adds them to
  the sanitized messages before they enter the message pipeline.

Zaqar's sanitizing keeps the order and the number of the messages, so the
n-th sanitized message is the n-th posted one. An invalid filter field
raises Zaqar's ``ValidationFailed``, which the stock resource answers with
HTTP 400 (``HTTPBadRequestAPI``) before anything reaches storage.
"""

import contextvars
import io

from oslo_log import log as logging
from zaqar.transport import utils as transport_utils
from zaqar.transport import validation
from zaqar.transport.wsgi.v2_0 import messages

import zaqar_filtering
from zaqar_filtering.policy import message as policy_message

LOG = logging.getLogger(__name__)

# The body of the post being handled, set only while
# MessagesResource.on_post runs. A context variable keeps concurrent
# requests apart under threaded WSGI servers.
_CURRENT_BODY = contextvars.ContextVar('zaqar_filtering_current_body',
                                       default=None)


class _RecordingStream:
    """A request body stream that keeps a copy of what is read from it."""

    def __init__(self, stream):
        self._stream = stream
        self._chunks = []

    def read(self, *args, **kwargs):
        data = self._stream.read(*args, **kwargs)
        self._chunks.append(data)
        return data

    def getvalue(self):
        return b''.join(self._chunks)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def filter_fields(raw_body, limits=zaqar_filtering.DEFAULT_LIMITS):
    """Return the validated filter fields of each message of a post.

    :param raw_body: the request body (bytes), already accepted by Zaqar:
        a JSON object whose ``messages`` is a list of objects.
    :param limits: a :class:`zaqar_filtering.Limits`.
    :returns: one dict per posted message, in order, as
        :func:`zaqar_filtering.validate_message` returns it (empty when the
        message has no filter field).
    :raises zaqar.transport.validation.ValidationFailed: naming the message
        (``messages[i]: ...``), the field, the value and the rule.
    """
    document = transport_utils.read_json(io.BytesIO(raw_body), len(raw_body))
    return [message_filter_fields(message, 'messages[%d]' % index, limits)
            for index, message in enumerate(document['messages'])]


def message_filter_fields(message, where,
                          limits=zaqar_filtering.DEFAULT_LIMITS):
    """Return the validated filter fields of one posted message.

    :param message: the message as posted (a dict).
    :param where: how errors name the message, e.g. ``messages[0]``.
    :param limits: a :class:`zaqar_filtering.Limits`.
    :raises zaqar.transport.validation.ValidationFailed: naming the
        message, the field, the value and the rule.
    """
    posted = {name: message[name] for name in policy_message.POSTED_FIELDS
              if name in message}
    try:
        return zaqar_filtering.validate_message(posted, limits)
    except zaqar_filtering.InvalidPolicy as exc:
        # The text goes through str.format: pass it as an argument so
        # that braces in a posted value are not read as a template.
        raise validation.ValidationFailed('{}', '%s: %s' % (where, exc))


class FieldKeepingController:
    """Zaqar's message controller, with the filter fields put back on post.

    Every attribute but ``post`` is the wrapped controller's.
    """

    def __init__(self, controller, limits=zaqar_filtering.DEFAULT_LIMITS):
        self._controller = controller
        self._limits = limits

    def post(self, queue_name, messages, client_uuid, project=None):
        body = _CURRENT_BODY.get()
        if body is not None:
            fields = filter_fields(body.getvalue(), self._limits)
            if len(fields) == len(messages):
                messages = [dict(message, **extra) if extra else message
                            for message, extra in zip(messages, fields)]
            else:
                LOG.warning('Posted %(posted)d messages but Zaqar kept '
                            '%(kept)d; their filter fields are dropped.',
                            {'posted': len(fields), 'kept': len(messages)})
        return self._controller.post(queue_name, messages=messages,
                                     client_uuid=client_uuid,
                                     project=project)

    def __getattr__(self, name):
        return getattr(self._controller, name)


class MessagesResource(messages.CollectionResource):
    """Zaqar's v2 messages collection, keeping the message filter fields.

    Takes Zaqar's constructor arguments, plus the :class:`Limits` that the
    filter fields are validated against.
    """

    __slots__ = ()

    def __init__(self, wsgi_conf, validate, message_controller,
                 queue_controller, default_message_ttl, encryptor_factory,
                 limits=zaqar_filtering.DEFAULT_LIMITS):
        super().__init__(wsgi_conf, validate,
                         FieldKeepingController(message_controller, limits),
                         queue_controller, default_message_ttl,
                         encryptor_factory)

    def on_post(self, req, resp, project_id, queue_name):
        body = _RecordingStream(req.stream)
        req.stream = body
        token = _CURRENT_BODY.set(body)
        try:
            return super().on_post(req, resp, project_id=project_id,
                                   queue_name=queue_name)
        finally:
            _CURRENT_BODY.reset(token)
