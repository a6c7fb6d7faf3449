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

"""The one local Spark session of the Spark tests, started on first use.

.stestr.conf puts every test under tests.functional.spark in one worker,
so the suite starts one JVM. The session runs local[2] without the UI,
with two shuffle partitions and Spark's log at ERROR, and is stopped when
the worker exits.
"""

import atexit
import os
import shutil
import sys

_SESSION = None

JAVA_MISSING = ('java is not on PATH and JAVA_HOME is not set: the Spark '
                'tests need Java 17 or newer (apt-get install '
                'openjdk-17-jre-headless)')


def java_missing():
    """Return why Spark cannot start here, or None."""
    if shutil.which('java') or os.environ.get('JAVA_HOME'):
        return None
    return JAVA_MISSING


def get():
    """Return the shared SparkSession, starting it on the first call."""
    global _SESSION
    if _SESSION is None:
        # The Python workers must import zaqar_filtering: this Python.
        os.environ['PYSPARK_PYTHON'] = sys.executable
        from pyspark.sql import SparkSession
        _SESSION = (SparkSession.builder.master('local[2]')
                    .appName('zaqar-filtering-tests')
                    .config('spark.ui.enabled', 'false')
                    .config('spark.ui.showConsoleProgress', 'false')
                    .config('spark.sql.shuffle.partitions', '2')
                    .config('spark.default.parallelism', '2')
                    .config('spark.log.level', 'ERROR')
                    .config('spark.driver.memory', '1g')
                    .getOrCreate())
        atexit.register(_SESSION.stop)
    return _SESSION
