"""The `pytest11` entry point named `acp_green`: it loads the plugin, `acp_green.testing`, under its own name.

So a conftest.py that also says `pytest_plugins = ["acp_green.testing"]` finds it loaded
already; were the entry point the plugin itself, pytest would refuse the same module under
a second name.
"""

pytest_plugins = ["acp_green.testing"]
