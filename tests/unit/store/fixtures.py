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

"""Stores for tests: MongoStore over mongomock, or over a real MongoDB."""

import os
import socket
import uuid

import mongomock
import pymongo

from zaqar_filtering.store.mongodb import MongoStore

#: Set to a MongoDB URI to run the store suites against a real server.
MONGODB_URL_VARIABLE = 'ZAQAR_FILTERING_TEST_MONGODB_URL'


def mongomock_store():
    """Return a MongoStore over a fresh in-memory mongomock database."""
    return MongoStore.for_uri('mongodb://mongomock.invalid',
                              client=mongomock.MongoClient(tz_aware=True))


def real_server(testcase, what):
    """Return ``(uri, client)`` of the real test server, or skip the test.

    :param what: what is skipped without it, for the skip message.
    """
    uri = os.environ.get(MONGODB_URL_VARIABLE)
    if not uri:
        testcase.skipTest('%s is not set: skipped %s against a real MongoDB'
                          % (MONGODB_URL_VARIABLE, what))
    client = pymongo.MongoClient(uri, tz_aware=True,
                                 serverSelectionTimeoutMS=5000)
    testcase.addCleanup(client.close)
    return uri, client


def fresh_database(testcase, client, kind=''):
    """Return the name of a new database, dropped after the test."""
    name = 'zaqar_filtering_test_%s%s' % (kind, uuid.uuid4().hex[:12])
    testcase.addCleanup(client.drop_database, name)
    return name


def real_store(testcase):
    """Return a MongoStore on a fresh database of the real test server.

    Skips the test, saying why, when the variable is not set.
    """
    uri, client = real_server(testcase, 'the store suite (it ran against '
                                        'mongomock)')
    return MongoStore.for_uri(uri, client=client,
                              database=fresh_database(testcase, client))


def unreachable_store():
    """Return a MongoStore whose server refuses connections, quickly."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    return MongoStore.for_uri('mongodb://127.0.0.1:%d/' % port,
                              server_selection_timeout_seconds=0.2,
                              connect_timeout_seconds=0.2)
