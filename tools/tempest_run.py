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

"""Tempest against a real Keystone and a real Zaqar running the plugin.

Run from the repository root: ``.venv/bin/python tools/tempest_run.py
--subunit FILE`` (``make test`` does). It starts, on 127.0.0.1 and free
ports:

* a redis-server (Zaqar's message store),
* Keystone on SQLite with fernet tokens, bootstrapped with an ``admin``
  user and a catalog holding the ``messaging`` service, served by gunicorn
  with one worker (two would lock SQLite),
* ``zaqar-filtering-server`` with ``auth_strategy = keystone``, trust+
  subscriptions (``[trustee]``) and the plugin's two pipeline stages,

then runs ``tempest run`` on this project's tempest plugin
(``zaqar_filtering_tempest_plugin``) and on zaqar-tempest-plugin's v2 tests
(``zaqar_tempest_plugin.tests.v2``), with dynamic credentials. Everything it
started is stopped by PID at the end, also after an error or a signal.

The tempest result is written as a subunit v2 stream to ``--subunit`` so
that ``make test`` counts it with the unit and functional tests. When the
services cannot be started, or a suite ran no test at all, the stream holds
a failed test saying so (``tools.tempest_run.<step>``): nothing is skipped
silently. The exit status is 0 when every test passed, 1 otherwise.

Set ``ZAQAR_FILTERING_KEEP_WORKDIR=1`` to keep the work directory
(configuration, logs, tempest's own ``.stestr`` repository).
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
import uuid

import requests
import subunit
import testtools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tests.functional import base  # noqa: E402

HOST = base.HOST
#: The test suites run, by test id prefix; each must run at least one test.
SUITES = {
    'zaqar_filtering_tempest_plugin': 'zaqar_filtering_tempest_plugin.',
    'zaqar-tempest-plugin v2': 'zaqar_tempest_plugin.tests.v2.',
}
TEST_REGEX = (r'^(zaqar_filtering_tempest_plugin\.'
              r'|zaqar_tempest_plugin\.tests\.v2\.)')
REGION = 'RegionOne'
ADMIN_PASSWORD = 'tempest-admin-' + uuid.uuid4().hex[:12]
SERVICE_PASSWORD = 'tempest-zaqar-' + uuid.uuid4().hex[:12]
#: Seconds the whole tempest run may take before it is stopped.
TEMPEST_TIMEOUT = 900
#: Seconds one keystone-manage command may take.
MANAGE_TIMEOUT = 180


class Interrupted(Exception):
    pass


def _on_signal(signum, frame):
    raise Interrupted('signal %d' % signum)


def _run(argv, log_path, timeout=MANAGE_TIMEOUT, env=None, cwd=None):
    """Run a command to completion, its output appended to ``log_path``."""
    with open(log_path, 'ab') as log:
        log.write(('\n$ %s\n' % ' '.join(argv)).encode())
        log.flush()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=env, cwd=cwd)
        try:
            rc = proc.wait(timeout)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if rc != 0:
        with open(log_path, 'rb') as log:
            tail = log.read().decode('utf-8', 'replace').splitlines()[-30:]
        raise RuntimeError('%s exited with status %d:\n%s'
                           % (' '.join(argv), rc, '\n'.join(tail)))


class Keystone(base.Process):
    """Keystone (public API) on SQLite, served by gunicorn."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.port = base.free_port()
        self.conf_path = os.path.join(workdir, 'keystone.conf')
        # keystone.server.wsgi parses sys.argv with oslo.config: started by
        # gunicorn it would see gunicorn's arguments, fail, and the worker
        # would restart forever while requests hang. Clear them first.
        with open(os.path.join(workdir, 'keystone_app.py'), 'w') as app:
            app.write(textwrap.dedent('''\
                import sys
                sys.argv = sys.argv[:1]
                from keystone.server import wsgi
                application = wsgi.initialize_public_application()
                '''))
        env = dict(os.environ, OS_KEYSTONE_CONFIG_DIR=workdir,
                   OS_KEYSTONE_CONFIG_FILES='keystone.conf')
        super().__init__(
            'keystone',
            [base.venv_script('gunicorn'), '--workers', '1',
             '--bind', '%s:%d' % (HOST, self.port),
             '--pythonpath', workdir, '--timeout', '120',
             '--access-logfile', '-', 'keystone_app:application'],
            os.path.join(workdir, 'keystone.log'), env=env)

    @property
    def url(self):
        return 'http://%s:%d/v3' % (HOST, self.port)

    def configure(self):
        keys = {name: os.path.join(self.workdir, name)
                for name in ('fernet-keys', 'credential-keys',
                             'fernet-receipts')}
        for path in keys.values():
            os.makedirs(path, mode=0o700, exist_ok=True)
        base.write_ini(self.conf_path, {
            'DEFAULT': {'debug': 'False'},
            'database': {'connection': 'sqlite:///' + os.path.join(
                self.workdir, 'keystone.db')},
            'token': {'provider': 'fernet'},
            'fernet_tokens': {'key_repository': keys['fernet-keys']},
            'fernet_receipts': {'key_repository': keys['fernet-receipts']},
            'credential': {'key_repository': keys['credential-keys']},
            'cache': {'enabled': 'False'},
        })
        manage = [base.venv_script('keystone-manage'),
                  '--config-file', self.conf_path]
        log = os.path.join(self.workdir, 'keystone-manage.log')
        _run(manage + ['db_sync'], log)
        for command in ('fernet_setup', 'credential_setup'):
            _run(manage + [command, '--keystone-user', 'root',
                           '--keystone-group', 'root'], log)
        bootstrap = manage + [
            'bootstrap', '--bootstrap-password', ADMIN_PASSWORD,
            '--bootstrap-region-id', REGION]
        for interface in ('public', 'internal', 'admin'):
            bootstrap += ['--bootstrap-%s-url' % interface, self.url + '/']
        _run(bootstrap, log)

    def ping(self):
        try:
            return requests.get(self.url, timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def start(self):
        super().start()
        self.wait_until(self.ping, timeout=90)
        return self


class Identity:
    """Just enough of Keystone's v3 API to write the catalog."""

    def __init__(self, url, user, password, project):
        self.url = url
        self.session = requests.Session()
        response = self.session.post(url + '/auth/tokens', json={'auth': {
            'identity': {'methods': ['password'], 'password': {'user': {
                'name': user, 'password': password,
                'domain': {'id': 'default'}}}},
            'scope': {'project': {'name': project,
                                  'domain': {'id': 'default'}}}}},
            timeout=30)
        self._check(response, 201)
        self.session.headers['X-Auth-Token'] = (
            response.headers['X-Subject-Token'])

    @staticmethod
    def _check(response, status):
        if response.status_code != status:
            raise RuntimeError('Keystone answered %s %s with %d: %s' % (
                response.request.method, response.request.url,
                response.status_code, response.text))
        return response.json() if response.content else None

    def create(self, collection, **attributes):
        kind = collection[:-1]
        response = self.session.post('%s/%s' % (self.url, collection),
                                     json={kind: attributes}, timeout=30)
        return self._check(response, 201)[kind]

    def find(self, collection, name):
        response = self.session.get('%s/%s' % (self.url, collection),
                                    params={'name': name}, timeout=30)
        found = self._check(response, 200)[collection]
        return found[0] if found else None

    def grant(self, project_id, user_id, role_name):
        role = self.find('roles', role_name) or self.create(
            'roles', name=role_name)
        response = self.session.put(
            '%s/projects/%s/users/%s/roles/%s' % (
                self.url, project_id, user_id, role['id']), timeout=30)
        self._check(response, 204)

    def close(self):
        self.session.close()


def register_zaqar(keystone_url, zaqar_url):
    """Create the messaging service, its endpoints and the zaqar user."""
    identity = Identity(keystone_url, 'admin', ADMIN_PASSWORD, 'admin')
    try:
        service = identity.create('services', name='zaqar', type='messaging',
                                  enabled=True)
        for interface in ('public', 'internal', 'admin'):
            identity.create('endpoints', service_id=service['id'],
                            interface=interface, url=zaqar_url,
                            region_id=REGION, enabled=True)
        project = identity.create('projects', name='service',
                                  domain_id='default', enabled=True)
        user = identity.create('users', name='zaqar',
                               password=SERVICE_PASSWORD,
                               domain_id='default',
                               default_project_id=project['id'],
                               enabled=True)
        for role in ('admin', 'service'):
            identity.grant(project['id'], user['id'], role)
    finally:
        identity.close()


class ZaqarServer(base.ZaqarServer):
    """``zaqar-filtering-server`` behind Keystone: ready once it answers."""

    def ping(self):
        # Without a token the answer is 401, which is as good as ready.
        try:
            response = requests.get(self.url + '/v2/ping', timeout=2)
        except requests.RequestException:
            return False
        return response.status_code < 500


def zaqar_overrides(keystone_url):
    service_user = {
        'auth_type': 'password',
        'auth_url': keystone_url,
        'username': 'zaqar',
        'password': SERVICE_PASSWORD,
        'user_domain_name': 'Default',
    }
    return {
        'DEFAULT': {'auth_strategy': 'keystone'},
        'storage': {
            'message_pipeline': 'zaqar_filtering.notifier, '
                                'zaqar_filtering.ordering',
            'subscription_pipeline': 'zaqar_filtering.validation',
            'claim_pipeline': 'zaqar_filtering.ordering',
        },
        'keystone_authtoken': dict(
            service_user,
            www_authenticate_uri=keystone_url,
            project_name='service',
            project_domain_name='Default',
            service_token_roles_required='True',
            region_name=REGION),
        'trustee': service_user,
        'signed_url': {'secret_key': uuid.uuid4().hex},
    }


def write_tempest_conf(path, workdir, keystone_url):
    return base.write_ini(path, {
        'DEFAULT': {'debug': 'False',
                    'log_file': os.path.join(workdir, 'tempest.log')},
        'oslo_concurrency': {'lock_path': os.path.join(workdir, 'locks')},
        'auth': {
            'use_dynamic_credentials': 'True',
            'admin_username': 'admin',
            'admin_password': ADMIN_PASSWORD,
            'admin_project_name': 'admin',
            'admin_domain_name': 'Default',
        },
        'identity': {
            'uri_v3': keystone_url,
            'auth_version': 'v3',
            'region': REGION,
            'v3_endpoint_type': 'public',
        },
        'identity-feature-enabled': {'api_v2': 'False'},
        'service_available': {
            'zaqar': 'True',
            'zaqar_filtering': 'True',
            'cinder': 'False',
            'glance': 'False',
            'neutron': 'False',
            'nova': 'False',
            'swift': 'False',
            'horizon': 'False',
        },
        'messaging': {'catalog_type': 'messaging'},
    })


def run_tempest(workdir, keystone_url, subunit_path, concurrency, regex):
    tempest_dir = os.path.join(workdir, 'tempest')
    os.makedirs(os.path.join(workdir, 'locks'), exist_ok=True)
    os.makedirs(tempest_dir)
    conf = write_tempest_conf(os.path.join(workdir, 'tempest.conf'),
                              workdir, keystone_url)
    # "tempest run --config-file" in an empty directory: a local run, with
    # no workspace registered in ~/.tempest/workspace.yaml.
    argv = [base.venv_script('tempest'), 'run', '--config-file', conf,
            '--regex', regex, '--concurrency', str(concurrency)]
    print('$ %s' % ' '.join(argv), flush=True)
    proc = subprocess.Popen(argv, cwd=tempest_dir, stdin=subprocess.DEVNULL)
    try:
        rc = proc.wait(TEMPEST_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(base.STOP_TIMEOUT)
        raise RuntimeError('tempest run took more than %d s; stopped'
                           % TEMPEST_TIMEOUT)
    except BaseException:
        proc.terminate()
        proc.wait(base.STOP_TIMEOUT)
        raise
    with open(subunit_path, 'wb') as out:
        subprocess.run([base.venv_script('stestr'), 'last', '--subunit'],
                       cwd=tempest_dir, stdout=out, check=True)
    return rc


def suite_counts(subunit_path):
    """Return ``{suite: number of tests}`` found in a subunit stream."""
    counts = dict.fromkeys(SUITES, 0)
    seen = set()

    class Collect(testtools.StreamResult):
        def status(self, test_id=None, test_status=None, **kwargs):
            if test_id and test_status in ('success', 'fail', 'skip',
                                           'xfail', 'uxsuccess'):
                seen.add(test_id)

    with open(subunit_path, 'rb') as stream:
        case = subunit.ByteStreamToStreamResult(stream)
        result = Collect()
        result.startTestRun()
        case.run(result)
        result.stopTestRun()
    for test_id in seen:
        for suite, prefix in SUITES.items():
            if test_id.startswith(prefix):
                counts[suite] += 1
    return counts


def append_failure(subunit_path, step, text):
    """Append a failed test ``tools.tempest_run.<step>`` to the stream."""
    with open(subunit_path, 'ab') as out:
        result = subunit.StreamResultToBytes(out)
        test_id = 'tools.tempest_run.%s' % step
        result.status(test_id=test_id, test_status='inprogress')
        result.status(test_id=test_id, file_name='traceback',
                      file_bytes=text.encode('utf-8'),
                      mime_type='text/plain; charset=utf8', eof=True)
        result.status(test_id=test_id, test_status='fail')


def run(workdir, subunit_path, concurrency, regex=TEST_REGEX):
    started = []
    step = 'start_services'
    try:
        redis_server = base.RedisServer(workdir)
        started.append(redis_server)
        redis_server.start()

        step = 'start_keystone'
        keystone = Keystone(workdir)
        keystone.configure()
        started.append(keystone)
        keystone.start()

        step = 'start_zaqar'
        port = base.free_port()
        zaqar_url = 'http://%s:%d' % (HOST, port)
        register_zaqar(keystone.url, zaqar_url)
        conf = base.write_zaqar_conf(workdir, redis_server.uri, port,
                                     zaqar_overrides(keystone.url))
        zaqar = ZaqarServer(conf, port, os.path.join(workdir, 'zaqar.log'))
        started.append(zaqar)
        zaqar.start()
        print('Started redis-server (pid %d), Keystone (gunicorn pid %d, '
              '%s) and zaqar-filtering-server (pid %d, %s) with Keystone '
              'auth' % (redis_server.pid, keystone.pid, keystone.url,
                        zaqar.pid, zaqar.url), flush=True)

        step = 'tempest_run'
        rc = run_tempest(workdir, keystone.url, subunit_path, concurrency,
                         regex)
        counts = suite_counts(subunit_path)
        print('tempest: %s' % ', '.join(
            '%s: %d tests' % item for item in counts.items()), flush=True)
        empty = [suite for suite, count in counts.items()
                 if not count and regex == TEST_REGEX]
        if empty:
            append_failure(subunit_path, 'suites_ran',
                           'no test ran from: %s' % ', '.join(empty))
            return 1
        return 0 if rc == 0 else 1
    except Exception:
        text = traceback.format_exc()
        print('tempest run failed at %s:\n%s\nConfiguration and logs: %s'
              % (step, text, workdir), file=sys.stderr)
        append_failure(subunit_path, step, text)
        return 1
    finally:
        for process in reversed(started):
            process.stop()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--subunit', required=True,
                        help='Write the subunit v2 stream of the run here.')
    parser.add_argument('--concurrency', type=int, default=2,
                        help='Tempest workers (default: 2).')
    parser.add_argument('--regex', default=TEST_REGEX,
                        help='Run only these tests (default: both suites, '
                             'each of which must run at least one test).')
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_signal)
    open(args.subunit, 'wb').close()
    workdir = tempfile.mkdtemp(prefix='zaqar-filtering-tempest-')
    start = time.monotonic()
    try:
        rc = run(workdir, args.subunit, args.concurrency, args.regex)
    except (KeyboardInterrupt, Interrupted):
        append_failure(args.subunit, 'interrupted', 'interrupted')
        print('\nInterrupted; everything started is stopped.',
              file=sys.stderr)
        rc = 130
    print('tempest run: %.0f s' % (time.monotonic() - start), flush=True)
    if rc == 0 and not os.environ.get('ZAQAR_FILTERING_KEEP_WORKDIR'):
        shutil.rmtree(workdir, ignore_errors=True)
    else:
        print('Configuration and logs kept in %s' % workdir, file=sys.stderr)
    return rc


if __name__ == '__main__':
    sys.exit(main())
