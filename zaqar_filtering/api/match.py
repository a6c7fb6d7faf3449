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

"""``POST /v2/queues/{queue_name}/subscriptions/match``: a dry run.

Given ``{"message": {...}}``, a message as it would be posted, it answers
which subscriptions would receive it and, for each of the others, why not::

    {"matched": [{"subscription_id": ..., "subscriber": ...}],
     "not_matched": [{"subscription_id": ..., "subscriber": ...,
                      "reason": "filter_policy: price 150 is not > 200"}],
     "links": [{"rel": "next", "href": ...}]}

The message is checked as a post checks it (size, ``ttl``, ``delay``,
``body``, filter fields: the same 400s) but nothing is stored, created or
delivered. Subscriptions come a page at a time (``limit``, ``marker``, as
in the subscription listing), from the caller's project only. Reading it
takes the policy rule of reading a subscription (``subscription:get``).

The resource serves any collection of subscriptions Zaqar keeps by source
name: :class:`zaqar_filtering.api.topics.TopicMatchResource` answers for
``/v2/topics/{topic_name}/subscriptions/match`` with a topic's.
"""

import falcon
from oslo_log import log as logging
from zaqar.common import decorators
from zaqar.storage import errors as storage_errors
from zaqar.transport import acl
from zaqar.transport import utils
from zaqar.transport import validation
from zaqar.transport.wsgi import errors as wsgi_errors
from zaqar.transport.wsgi import utils as wsgi_utils

import zaqar_filtering
from zaqar_filtering.api import messages
from zaqar_filtering.policy import message as policy_message
from zaqar_filtering.policy.subscription import parse_options

LOG = logging.getLogger(__name__)

ROUTE = '/v2/queues/{queue_name}/subscriptions/match'
#: The same for topics (see :mod:`zaqar_filtering.api.topics`).
TOPIC_ROUTE = '/v2/topics/{topic_name}/subscriptions/match'


class MatchResource:
    """Which subscriptions would receive a message, and why the others not.

    :param validate: Zaqar's ``Validator``.
    :param subscription_controller: Zaqar's subscription controller.
    :param source_controller: the queue (or topic) controller, for the
        metadata a post reads (``_max_messages_post_size``,
        ``_default_message_ttl``, ``_default_message_delay``).
    :param default_message_ttl: ``[transport] default_message_ttl``.
    :param limits: the :class:`zaqar_filtering.Limits` of the deployment.
    :param require_confirmation: ``[notification] require_confirmation``:
        unconfirmed subscriptions receive nothing.
    """

    __slots__ = ('_validate', '_subscriptions', '_sources', '_default_ttl',
                 '_limits', '_require_confirmation')

    def __init__(self, validate, subscription_controller, source_controller,
                 default_message_ttl, limits=zaqar_filtering.DEFAULT_LIMITS,
                 require_confirmation=False):
        self._validate = validate
        self._subscriptions = subscription_controller
        self._sources = source_controller
        self._default_ttl = default_message_ttl
        self._limits = limits
        self._require_confirmation = require_confirmation

    @decorators.TransportLog('Subscriptions match')
    @acl.enforce('subscription:get')
    def on_post(self, req, resp, project_id, queue_name):
        paging = {}
        req.get_param('marker', store=paging)
        req.get_param_as_int('limit', store=paging)
        try:
            self._validate.subscription_listing(**paging)
            metadata = self._metadata(queue_name, project_id)
            self._validate.message_length(
                req.content_length,
                max_msg_post_size=metadata.get('_max_messages_post_size'))
            view = policy_message.MessageView(self._message(req, metadata))
        except validation.ValidationFailed as exc:
            LOG.debug(exc)
            raise wsgi_errors.HTTPBadRequestAPI(str(exc))

        try:
            results = self._subscriptions.list(queue_name, project=project_id,
                                               **paging)
            subscriptions = list(next(results))
            marker = next(results)
        except Exception:
            description = 'Subscriptions could not be listed.'
            LOG.exception(description)
            raise wsgi_errors.HTTPServiceUnavailable(description)

        matched, not_matched = [], []
        for subscription in subscriptions:
            entry = {'subscription_id': subscription['id'],
                     'subscriber': subscription['subscriber']}
            reason = self._reason(subscription, view)
            if reason is None:
                matched.append(entry)
            else:
                entry['reason'] = reason
                not_matched.append(entry)
        links = []
        if subscriptions:
            paging['marker'] = marker or paging.get('marker', '')
            links.append({'rel': 'next',
                          'href': req.path + falcon.to_query_str(paging)})
        resp.text = utils.to_json({'matched': matched,
                                   'not_matched': not_matched,
                                   'links': links})

    def _metadata(self, name, project_id):
        try:
            return self._sources.get_metadata(name, project_id)
        except storage_errors.DoesNotExist:
            # A post would create it with no metadata; a dry run does not.
            return {}

    def _message(self, req, metadata):
        """Return the message of the request, checked as a post checks it."""
        document = wsgi_utils.deserialize(req.stream, req.content_length)
        if not isinstance(document, dict) or not isinstance(
                document.get('message'), dict):
            raise validation.ValidationFailed(
                'The request body must be a JSON object with the message '
                'under "message": {{"message": {{"body": ...}}}}.')
        posted = document['message']
        spec = (('ttl', int, metadata.get('_default_message_ttl')
                 or self._default_ttl),
                ('body', '*', None))
        if metadata.get('_default_message_delay'):
            spec += (('delay', int, metadata['_default_message_delay']),)
        [message] = wsgi_utils.sanitize([posted], spec,
                                        doctype=wsgi_utils.JSONArray)
        self._validate.message_posting([message])
        message.update(messages.message_filter_fields(posted, 'message',
                                                      self._limits))
        try:
            return policy_message.with_body_fields(message, self._limits)
        except zaqar_filtering.InvalidPolicy as exc:
            # ValidationFailed formats its text: pass it as an argument.
            raise validation.ValidationFailed('{}', 'message: %s' % exc)

    def _reason(self, subscription, view):
        """Return why the subscription would not receive it, or None."""
        if (self._require_confirmation
                and not subscription.get('confirmed', True)):
            return ('the subscription is not confirmed, and this deployment '
                    'notifies confirmed subscriptions only')
        try:
            policy = parse_options(subscription.get('options'), self._limits)
        except zaqar_filtering.InvalidPolicy as exc:
            return ('its filter policy is invalid, so it receives nothing: '
                    '%s' % exc)
        return policy.explain(view)
