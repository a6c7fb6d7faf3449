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

"""Sphinx configuration for the zaqar-filtering API reference.

Build with ``tox -e api-ref``. The pages use the os-api-ref directives
(``rest_method``, ``rest_parameters``) and the openstackdocs theme, which
os-api-ref depends on and whose Bootstrap scripts drive the "detail" and
"Show All" buttons.
"""

# -- General configuration ---------------------------------------------------

extensions = [
    'os_api_ref',
    'openstackdocstheme',
]

# openstackdocstheme: where the "report a bug" link and the source live.
openstackdocs_repo_name = 'openstack/zaqar-filtering'
openstackdocs_bug_project = 'zaqar-filtering'
openstackdocs_bug_tag = 'api-ref'
openstackdocs_use_storyboard = False

# The suffix of source filenames.
source_suffix = {'.rst': 'restructuredtext'}

# The top-level toctree document.
root_doc = 'index'

project = 'Zaqar Subscription Filtering API Reference'
copyright = '2026-present, OpenStack Foundation'
author = 'OpenStack'

# The API is versioned by Zaqar's URL (/v2), not by this package.
version = ''
release = ''

pygments_style = 'sphinx'

# -- Options for HTML output -------------------------------------------------

html_theme = 'openstackdocs'
html_theme_options = {
    'sidebar_mode': 'toc',
}
html_title = 'Zaqar Subscription Filtering API Reference'
htmlhelp_basename = 'ZaqarFilteringAPIRefdoc'
