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

"""Sphinx configuration for the zaqar-filtering operator documentation.

Build with ``make docs``. ``oslo_config.sphinxconfiggen`` runs
oslo-config-generator on every build, so the sample configuration in
``_static/zaqar-filtering.conf.sample`` is always that of the code, and
``oslo_config.sphinxext`` documents each option (``show-options``).
"""

# -- General configuration ---------------------------------------------------

extensions = [
    'oslo_config.sphinxconfiggen',
    'oslo_config.sphinxext',
    'openstackdocstheme',
]

# oslo_config.sphinxconfiggen: writes _static/zaqar-filtering.conf.sample.
config_generator_config_file = (
    '../../etc/zaqar-filtering/zaqar-filtering-config-generator.conf')
sample_config_basename = '_static/zaqar-filtering'

openstackdocs_repo_name = 'openstack/zaqar-filtering'
openstackdocs_bug_project = 'zaqar-filtering'
openstackdocs_bug_tag = 'doc'
openstackdocs_use_storyboard = False

source_suffix = {'.rst': 'restructuredtext'}
root_doc = 'index'

project = 'zaqar-filtering'
copyright = '2026-present, OpenStack Foundation'
author = 'OpenStack'

version = ''
release = ''

pygments_style = 'native'

# -- Options for HTML output -------------------------------------------------

html_theme = 'openstackdocs'
html_title = 'zaqar-filtering'
htmlhelp_basename = 'ZaqarFilteringdoc'
