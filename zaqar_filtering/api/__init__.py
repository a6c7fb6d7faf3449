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

"""Zaqar's v2 HTTP API with the message filter fields kept.

Stock Zaqar keeps only ``ttl``, ``body`` and ``delay`` of a posted message.
:class:`~zaqar_filtering.api.driver.Driver` serves the same API but routes
``POST /v2/queues/{queue_name}/messages`` to
:class:`~zaqar_filtering.api.messages.MessagesResource`, which also keeps
``filter_policies``, ``routing_key`` and ``attributes``, validates them and
hands them to the message pipeline (the notifier stage) beside ``ttl`` and
``body``. Everything else is Zaqar's own code.
"""
