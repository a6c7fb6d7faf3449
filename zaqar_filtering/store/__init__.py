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

"""Policy stores: ``[filtering] policy_store`` picks one by name.

Drivers are entry points of the ``zaqar_filtering.policy_stores``
namespace, built with zaqar.conf's ``ConfigOpts``.
"""

import threading

import stevedore

from zaqar_filtering import opts

NAMESPACE = 'zaqar_filtering.policy_stores'

_SHARED = {}
_SHARED_LOCK = threading.Lock()


def load_store(conf):
    """Return a new store of the driver ``[filtering] policy_store`` names.

    :raises ValueError: naming the option and the drivers installed, when
        no driver has that name.
    """
    opts.register_opts(conf)
    name = conf[opts.GROUP_NAME].policy_store
    try:
        manager = stevedore.DriverManager(NAMESPACE, name,
                                          invoke_on_load=True,
                                          invoke_args=(conf,))
    except stevedore.exception.NoMatches:
        known = sorted(stevedore.ExtensionManager(NAMESPACE).names())
        raise ValueError('[%s] policy_store = %s: no such driver in the '
                         'entry point namespace %s; installed: %s'
                         % (opts.GROUP_NAME, name, NAMESPACE,
                            ', '.join(known) or 'none'))
    return manager.driver


def shared_store(conf):
    """Return this process's store for ``conf``, loading it on first use."""
    with _SHARED_LOCK:
        store = _SHARED.get(id(conf))
        if store is None:
            store = _SHARED[id(conf)] = load_store(conf)
        return store
