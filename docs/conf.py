# Sphinx configuration of the frugalmqtt docs site: `make docs` builds it into
# build/docs (strict: warnings are errors, every reference must resolve;
# tests/test_docs.py builds it the same way).
project = "frugalmqtt"
author = "frugalmqtt contributors"
copyright = "frugalmqtt contributors"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
nitpicky = True  # a reference to an undocumented class or method is an error
myst_heading_anchors = 3  # [text](page.md#a-heading) links are checked too
html_theme = "alabaster"
html_theme_options = {"description": "MQTT 3.1.1 + 5.0 for MicroPython", "fixed_sidebar": True,
                      "page_width": "1160px"}
pygments_style = "sphinx"
