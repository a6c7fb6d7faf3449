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

from zaqar_filtering.store.mongodb import MongoStore

#: Set to a MongoDB URI to run the store suites against a real server.
MONGODB_URL_VARIABLE = 'ZAQAR_FILTERING_TEST_MONGODB_URL'


def mongomock_store():
    """Return a MongoStore over a fresh in-memory mongomock database."""
    return MongoStore.for_uri('mongodb://mongomock.invalid',
                              client=mongomock.MongoClient(tz_aware=True))


def real_store(testcase):
    """Return a MongoStore on a fresh database of the real test server.

    Skips the test, saying why, when the variable is not set; the database
    is dropped after the test.
    """
    uri = os.environ.get(MONGODB_URL_VARIABLE)
    if not uri:
        testcase.skipTest('%s is not set: skipped the suite against a real '
                          'MongoDB (it ran against mongomock)'
                          % MONGODB_URL_VARIABLE)
    database = 'zaqar_filtering_test_%s' % uuid.uuid4().hex[:12]
    store = MongoStore.for_uri(uri, database=database)
    testcase.addCleanup(store.close)
    testcase.addCleanup(store._client.drop_database, database)
    return store


def unreachable_store():
    """Return a MongoStore whose server refuses connections, quickly."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    return MongoStore.for_uri('mongodb://127.0.0.1:%d/' % port,
                              server_selection_timeout_seconds=0.2,
                              connect_timeout_seconds=0.2)
