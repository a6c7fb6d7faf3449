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

"""``/v2/topics``: topics that deliver and keep nothing (CMQ's topic).

Zaqar 23 routes the topic API but it does not work (no topic controller
for redis; the queue resources are mounted with the wrong URI field). These
resources replace its routes:

* a topic is a name and metadata in the :mod:`topic registry
  <zaqar_filtering.topic_store>`;
* its subscriptions are Zaqar's, under the ``source`` ``topic:NAME``, with
  Zaqar's own subscription resources and the subscription pipeline (so the
  same policies, the same 400s and the same delivery ledger as a queue's);
* a posted message goes through the same checks as a queue's (Zaqar's
  messages resource, with the filter fields kept) and then only to the
  notifier stage: it is matched and handed over for delivery, never stored.
  One that matches nobody is gone at once; failed deliveries stay in the
  delivery ledger, which the topic's ``stats`` count.
"""

import inspect
import io
import json
import re
import threading
import uuid

import falcon
from oslo_log import log as logging
from zaqar.common import decorators
from zaqar.common import urls
from zaqar.notification import notifier
from zaqar.storage import errors as storage_errors
from zaqar.transport import acl
from zaqar.transport import utils
from zaqar.transport import validation
from zaqar.transport.wsgi import errors as wsgi_errors
from zaqar.transport.wsgi import utils as wsgi_utils
from zaqar.transport.wsgi.v2_0 import queues as zaqar_queues

from zaqar_filtering.api import deliveries
from zaqar_filtering.api import match
from zaqar_filtering.api import messages
from zaqar_filtering.api import subscriptions
from zaqar_filtering.store.base import StoreUnavailable
from zaqar_filtering import topic_store
from zaqar_filtering import zaqar_storage

LOG = logging.getLogger(__name__)

PREFIX = '/v2/topics'
#: The media type of Zaqar's metadata PATCH.
PATCH_TYPE = 'application/openstack-messaging-v2.0-json-patch'


def _unavailable(exc):
    LOG.error('Topics are unavailable: %s', exc)
    return wsgi_errors.HTTPServiceUnavailable(str(exc))


class _Guarded:
    """The topic registry, its failures answered with HTTP 503."""

    def __init__(self, topics):
        self._topics = topics

    def __getattr__(self, name):
        method = getattr(self._topics, name)

        def guarded(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except (topic_store.TopicsUnavailable, StoreUnavailable) as exc:
                raise _unavailable(exc)
        return guarded


class TopicsAsQueues:
    """The registry as the queue controller of Zaqar's code.

    ``sources`` says whether the resource passes topic names or subscription
    sources (``topic:NAME``).
    """

    def __init__(self, topics, sources):
        self._topics = topics
        self._sources = sources

    def _name(self, name):
        return topic_store.topic_of(name) if self._sources else name

    def exists(self, name, project=None):
        return self._topics.exists(project, self._name(name))

    def create(self, name, project=None, **kwargs):
        self._topics.ensure(project, self._name(name))

    def get_metadata(self, name, project=None):
        try:
            return self._topics.get(project, self._name(name))
        except storage_errors.TopicDoesNotExist:
            raise storage_errors.QueueDoesNotExist(name, project)

    # The notifier stage reads a retry policy with ``get``.
    get = get_metadata


class _TopicMetadata:
    """The registry as the queue controller of Zaqar's metadata PATCH."""

    def __init__(self, topics):
        self._topics = topics

    def get_metadata(self, name, project=None):
        # TopicDoesNotExist is a DoesNotExist: Zaqar answers 404.
        return self._topics.get(project, name)

    def set_metadata(self, name, metadata, project=None):
        self._topics.put(project, name, metadata)


#: Zaqar's queue metadata PATCH without its queue policy rule and log.
_PATCH_METADATA = inspect.unwrap(zaqar_queues.ItemResource.on_patch)


class _Publisher:
    """A message controller whose ``post`` delivers and stores nothing.

    :param stage: returns the topics'
        :class:`~zaqar_filtering.stages.notifier.NotifierStage`.
    """

    def __init__(self, stage):
        self._stage = stage

    def post(self, queue_name, messages, client_uuid, project=None):
        self._stage().post(topic_store.source_of(queue_name), messages,
                           client_uuid, project=project)
        # Ids name the publication in the answer; nothing keeps them.
        return [str(uuid.uuid4()) for _ in messages]


class TopicsResource:
    """``GET /v2/topics``: a project's topics, by name."""

    def __init__(self, validate, topics):
        self._validate = validate
        self._topics = topics

    @decorators.TransportLog('Topics collection')
    @acl.enforce('topics:get_all')
    def on_get(self, req, resp, project_id):
        kwargs = {}
        req.get_param('marker', store=kwargs)
        req.get_param_as_int('limit', store=kwargs)
        req.get_param_as_bool('detailed', store=kwargs)
        try:
            self._validate.queue_listing(**kwargs)
        except validation.ValidationFailed as exc:
            raise wsgi_errors.HTTPBadRequestAPI(str(exc))
        names = self._topics.names(project_id, kwargs.get('marker'),
                                   kwargs.get('limit', 10))
        topics = []
        for name in names:
            topic = {'name': name, 'href': req.path + '/' + name}
            if kwargs.get('detailed'):
                try:
                    topic['metadata'] = self._topics.get(project_id, name)
                except storage_errors.TopicDoesNotExist:
                    continue
            topics.append(topic)
        links = []
        if names:
            kwargs['marker'] = names[-1]
            links = [{'rel': 'next',
                      'href': req.path + falcon.to_query_str(kwargs)}]
        resp.text = utils.to_json({'topics': topics, 'links': links})


class TopicResource:
    """``PUT``, ``PATCH``, ``GET`` and ``DELETE /v2/topics/{topic_name}``.

    :param subscription_controller: Zaqar's pipelined subscription
        controller: deleting a topic deletes its subscriptions through the
        subscription pipeline, which drops their pending deliveries.
    """

    def __init__(self, validate, topics, subscription_controller):
        self._validate = validate
        self._topics = topics
        self._subscriptions = subscription_controller
        # Zaqar's queue item resource runs the JSON-patch of metadata.
        self._patcher = zaqar_queues.ItemResource(
            validate, _TopicMetadata(topics), None)

    @decorators.TransportLog('Topics item')
    @acl.enforce('topics:create')
    def on_put(self, req, resp, project_id, topic_name):
        try:
            self._validate.queue_metadata_length(req.content_length)
            metadata = {}
            if req.content_length:
                document = wsgi_utils.deserialize(req.stream,
                                                  req.content_length)
                metadata = wsgi_utils.sanitize(document)
            self._validate.queue_metadata_putting(metadata)
        except validation.ValidationFailed as exc:
            raise wsgi_errors.HTTPBadRequestAPI(str(exc))
        created = self._topics.put(project_id, topic_name, metadata)
        resp.status = falcon.HTTP_201 if created else falcon.HTTP_204
        resp.location = req.path

    @decorators.TransportLog('Topics item')
    @acl.enforce('topics:update')
    def on_patch(self, req, resp, project_id, topic_name):
        """Change metadata with a JSON patch, as for a queue (Zaqar's code).

        ``Content-Type: application/openstack-messaging-v2.0-json-patch``,
        a list of ``add``, ``replace`` and ``remove`` operations on
        ``/metadata/KEY``; the same 400s, 404, 409 and 415 as for a queue.
        """
        self._refuse_a_body_that_is_no_list(req)
        _PATCH_METADATA(self._patcher, req, resp, project_id, topic_name)

    def _refuse_a_body_that_is_no_list(self, req):
        # Zaqar's code answers 503 "Request body could not be read" for
        # JSON that is not a list (it catches its own 400): answer 400.
        try:
            self._validate.queue_metadata_length(req.content_length)
        except validation.ValidationFailed:
            return  # Zaqar's code refuses it, before reading it.
        if not req.content_length or req.content_type != PATCH_TYPE:
            return  # Zaqar's code answers 400 or 415.
        body = req.stream.read(req.content_length)
        req.stream = io.BytesIO(body)
        try:
            document = json.loads(body)
        except ValueError:
            return  # Zaqar's code says it cannot be parsed.
        if not isinstance(document, list):
            raise wsgi_errors.HTTPBadRequestBody(
                'Request body must be a JSON array of operation objects.')

    @decorators.TransportLog('Topics item')
    @acl.enforce('topics:get')
    def on_get(self, req, resp, project_id, topic_name):
        try:
            metadata = self._topics.get(project_id, topic_name)
        except storage_errors.TopicDoesNotExist as exc:
            raise wsgi_errors.HTTPNotFound(str(exc))
        resp.text = utils.to_json(metadata)

    @decorators.TransportLog('Topics item')
    @acl.enforce('topics:delete')
    def on_delete(self, req, resp, project_id, topic_name):
        source = topic_store.source_of(topic_name)
        try:
            found = list(zaqar_storage.list_subscriptions(
                self._subscriptions, project_id, source))
            for subscription in found:
                self._subscriptions.delete(source, subscription['id'],
                                           project=project_id)
        except StoreUnavailable as exc:
            raise _unavailable(exc)
        self._topics.delete(project_id, topic_name)
        resp.status = falcon.HTTP_204


class TopicStatsResource:
    """``GET /v2/topics/{topic_name}/stats``: what the topic retains.

    A topic keeps no message for consumers: ``retained`` counts the
    deliveries still pending in the ledger (``retrying`` of them failed
    at least once); ``delivered``, ``dropped`` and ``expired`` count the
    finished ones.
    """

    def __init__(self, topics, ledger):
        self._topics = topics
        self._ledger = ledger

    @decorators.TransportLog('Topics stats')
    @acl.enforce('topics:stats')
    def on_get(self, req, resp, project_id, topic_name):
        try:
            self._topics.get(project_id, topic_name)
        except storage_errors.TopicDoesNotExist as exc:
            raise wsgi_errors.HTTPNotFound(str(exc))
        counts = dict.fromkeys(('retained', 'retrying', 'delivered',
                                'dropped', 'expired'), 0)
        if self._ledger is not None:
            try:
                found = self._ledger.stats(project_id,
                                           topic_store.source_of(topic_name))
            except StoreUnavailable as exc:
                raise _unavailable(exc)
            for stats in found:
                counts['retained'] += stats.pending
                for name in ('retrying', 'delivered', 'dropped', 'expired'):
                    counts[name] += getattr(stats, name)
        counts['total'] = counts['retained']
        resp.text = utils.to_json({'messages': counts})


class TopicMessagesResource(messages.MessagesResource):
    """``POST /v2/topics/{topic_name}/messages``: match and deliver."""

    __slots__ = ()

    # A topic keeps no messages to list or to delete.
    on_get = None
    on_delete = None

    def on_post(self, req, resp, project_id, topic_name):
        return super().on_post(req, resp, project_id=project_id,
                               queue_name=topic_name)


class NotServed:
    """A Zaqar topic route with nothing behind it (HTTP 405)."""


def _source(kwargs):
    kwargs['queue_name'] = topic_store.source_of(kwargs.pop('topic_name'))
    return kwargs


#: The confirmation path Zaqar signs for a topic subscription.
_QUEUE_CONFIRM_PATH = re.compile(
    r'^/(?P<version>[^/]+)/queues/' + re.escape(topic_store.SOURCE_PREFIX)
    + r'(?P<topic>[^/]+)/(?P<rest>subscriptions/[^/]+/confirm)$')


class _TopicNotifier(notifier.NotifierDriver):
    """Zaqar's notifier, with confirmation URLs under ``/v2/topics``.

    With ``[notification] require_confirmation`` Zaqar signs the path
    ``/v2/queues/SOURCE/subscriptions/ID/confirm``; for a topic's
    subscription this names the topic's route and signs that instead.
    """

    def _execute(self, s_type, subscription, messages, conf=None,
                 retry_policy=None):
        for message in messages:
            if isinstance(message, dict) and 'URL-Signature' in message:
                _name_the_topic(message, conf.signed_url.secret_key)
        super()._execute(s_type, subscription, messages, conf, retry_policy)


def _name_the_topic(message, key):
    """Point a confirmation message of a topic subscription at the topic."""
    found = _QUEUE_CONFIRM_PATH.match(message['URL-Paths'])
    if found is None:
        return
    old = message['URL-Paths']
    path = '/%(version)s/topics/%(topic)s/%(rest)s' % found.groupdict()
    signed = urls.create_signed_url(
        key, [path], project=message['X-Project-ID'],
        expires=message['URL-Expires'], methods=[message['URL-Methods']])
    message.update({'URL-Paths': path, 'URL-Signature': signed['signature']})
    for name in ('WSGISubscribeURL', 'WebSocketSubscribeURL'):
        if name in message:
            message[name] = message[name].replace(old, path)
    message['Message'] = message['Message'].replace(
        'the queue: ' + topic_store.SOURCE_PREFIX, 'the topic: ')


class TopicSubscriptionsResource(subscriptions.CollectionResource):
    """Zaqar's subscriptions collection, for a topic's subscriptions."""

    __slots__ = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._notification = _TopicNotifier()

    def on_get(self, req, resp, **kwargs):
        return super().on_get(req, resp, **_source(kwargs))

    def on_post(self, req, resp, **kwargs):
        return super().on_post(req, resp, **_source(kwargs))


class TopicSubscriptionResource(subscriptions.ItemResource):
    """Zaqar's subscription item, for a topic's subscription."""

    __slots__ = ()

    def on_get(self, req, resp, **kwargs):
        return super().on_get(req, resp, **_source(kwargs))

    def on_delete(self, req, resp, **kwargs):
        return super().on_delete(req, resp, **_source(kwargs))

    def on_patch(self, req, resp, **kwargs):
        return super().on_patch(req, resp, **_source(kwargs))


class TopicConfirmResource(subscriptions.ConfirmResource):
    """Zaqar's subscription confirmation, for a topic's subscription."""

    __slots__ = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._notification = _TopicNotifier()

    def on_put(self, req, resp, **kwargs):
        return super().on_put(req, resp, **_source(kwargs))


class TopicDeliveriesResource(deliveries.DeliveriesResource):
    """A topic subscription's delivery counts."""

    __slots__ = ()

    def on_get(self, req, resp, **kwargs):
        return super().on_get(req, resp, **_source(kwargs))


class TopicMatchResource(match.MatchResource):
    """The dry run of a message on a topic's subscriptions."""

    __slots__ = ()

    def on_post(self, req, resp, **kwargs):
        return super().on_post(req, resp, **_source(kwargs))


class _LazyStage:
    """Builds the topics' notifier stage on the first publication."""

    def __init__(self, make):
        self._make = make
        self._stage = None
        self._lock = threading.Lock()

    def __call__(self):
        with self._lock:
            if self._stage is None:
                self._stage = self._make()
            return self._stage


def routes(driver, topics, ledger, make_stage, limits):
    """Return the topic routes and their resources.

    :param driver: our WSGI :class:`~zaqar_filtering.api.driver.Driver`.
    :param topics: a :class:`~zaqar_filtering.topic_store.Topics`.
    :param ledger: the delivery ledger, or None.
    :param make_stage: builds the notifier stage that delivers topic
        messages (called once, on the first publication).
    :param limits: the :class:`zaqar_filtering.Limits` of filter fields.
    """
    topics = _Guarded(topics)
    storage = driver._storage
    validate = driver._validate
    sources = TopicsAsQueues(topics, sources=True)
    conf = driver._conf
    item = PREFIX + '/{topic_name}'
    subscription = item + '/subscriptions/{subscription_id}'
    return [
        (PREFIX, TopicsResource(validate, topics)),
        (item, TopicResource(validate, topics,
                             storage.subscription_controller)),
        (item + '/stats', TopicStatsResource(topics, ledger)),
        (item + '/purge', NotServed()),
        (item + '/messages', TopicMessagesResource(
            driver._wsgi_conf, validate,
            _Publisher(_LazyStage(make_stage)),
            TopicsAsQueues(topics, sources=False),
            driver._defaults.message_ttl, driver._encryptor_factory,
            limits=limits)),
        (item + '/messages/{message_id}', NotServed()),
        (item + '/subscriptions', TopicSubscriptionsResource(
            validate, storage.subscription_controller,
            driver._defaults.subscription_ttl, sources, conf)),
        (match.TOPIC_ROUTE, TopicMatchResource(
            validate, storage.subscription_controller, sources,
            driver._defaults.message_ttl, limits,
            conf.notification.require_confirmation)),
        (subscription, TopicSubscriptionResource(
            validate, storage.subscription_controller)),
        (subscription + '/confirm', TopicConfirmResource(
            validate, storage.subscription_controller, conf)),
        (subscription + '/deliveries', TopicDeliveriesResource(
            storage.subscription_controller, ledger)),
    ]
