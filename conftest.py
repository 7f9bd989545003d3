"""This repository's own site settings for pytest-xlatune.

The plugin is active through its `pytest11` entry point once the package is installed; nothing
here is needed to use it. A site conftest is where a team pins its defaults, e.g.

    def pytest_configure(config):
        config.option.xlatune_store = config.option.xlatune_store or "/shared/xlatune-store"

Here we only keep pytest from collecting the tests' scratch directories.
"""

collect_ignore_glob = [".xlatune/*", ".venv/*"]
