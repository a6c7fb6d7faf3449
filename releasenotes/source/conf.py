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

"""Sphinx configuration for the zaqar-filtering release notes.

Build with ``tox -e releasenotes``. The notes themselves live in
``releasenotes/notes``; reno reads them from the git history, so a note is
published once it is committed.
"""

# -- General configuration ---------------------------------------------------

extensions = [
    'reno.sphinxext',
]

# The suffix of source filenames.
source_suffix = {'.rst': 'restructuredtext'}

# The top-level toctree document.
root_doc = 'index'

project = 'zaqar-filtering Release Notes'
copyright = '2026-present, OpenStack Foundation'
author = 'OpenStack'

# Release notes are not versioned like the code: reno names the versions.
version = ''
release = ''

exclude_patterns = []

pygments_style = 'sphinx'

# -- Options for HTML output -------------------------------------------------

# Sphinx's default theme (alabaster); no openstackdocstheme needed.
html_title = 'zaqar-filtering Release Notes'
htmlhelp_basename = 'ZaqarFilteringReleaseNotesdoc'

# -- Options for Internationalization output ---------------------------------

locale_dirs = ['locale/']
