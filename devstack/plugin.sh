#!/bin/bash
#
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

# DevStack plugin of zaqar-filtering: installs the package into Zaqar's
# environment and puts its stages into zaqar.conf. Enable it after Zaqar's
# own plugin, whose post-config phase writes zaqar.conf and uwsgi.conf
# first (see devstack/settings).

# Save trace setting
_XTRACE_ZAQAR_FILTERING=$(set +o | grep xtrace)
set -o xtrace

# install_zaqar_filtering() - Install the package (and its tempest plugin).
function install_zaqar_filtering {
    setup_develop $ZAQAR_FILTERING_DIR
}

# configure_zaqar_filtering() - The pipelines, the store and the WSGI app.
function configure_zaqar_filtering {
    iniset $ZAQAR_CONF storage message_pipeline \
        zaqar_filtering.notifier,zaqar_filtering.ordering
    iniset $ZAQAR_CONF storage subscription_pipeline zaqar_filtering.validation
    iniset $ZAQAR_CONF storage claim_pipeline zaqar_filtering.ordering
    iniset $ZAQAR_CONF filtering policy_store $ZAQAR_FILTERING_POLICY_STORE
    if [[ "$ZAQAR_FILTERING_POLICY_STORE" == "mongodb" ]]; then
        iniset $ZAQAR_CONF filtering:mongodb uri $ZAQAR_FILTERING_MONGODB_URI
    fi
    if [[ "$ZAQAR_FILTERING_WSGI" == "True" && -f $ZAQAR_UWSGI_CONF ]]; then
        # Zaqar's app keeps no filter fields: serve ours, from zaqar.conf.
        inidelete $ZAQAR_UWSGI_CONF uwsgi wsgi-file
        inidelete $ZAQAR_UWSGI_CONF uwsgi callable
        iniset $ZAQAR_UWSGI_CONF uwsgi module zaqar_filtering.wsgi:application
        iniset $ZAQAR_UWSGI_CONF uwsgi env ZAQAR_FILTERING_CONFIG_FILES=$ZAQAR_CONF
    fi
}

# configure_tempest_for_zaqar_filtering() - Enable the tempest plugin.
function configure_tempest_for_zaqar_filtering {
    iniset $TEMPEST_CONFIG service_available zaqar_filtering True
}

if is_service_enabled zaqar-filtering; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Installing zaqar-filtering"
        install_zaqar_filtering
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Configuring zaqar-filtering"
        configure_zaqar_filtering
    elif [[ "$1" == "stack" && "$2" == "test-config" ]]; then
        if is_service_enabled tempest; then
            echo_summary "Configuring tempest for zaqar-filtering"
            configure_tempest_for_zaqar_filtering
        fi
    fi
    # unstack and clean: nothing of its own runs or is left behind; Zaqar's
    # plugin stops the servers and removes its files.
fi

# Restore xtrace
$_XTRACE_ZAQAR_FILTERING
