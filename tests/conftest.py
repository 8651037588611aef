# The suite's options, fixtures, profiles and GPU pinning (remap_ab/pytest_plugin.py).
pytest_plugins = ("remap_ab.pytest_plugin",)
