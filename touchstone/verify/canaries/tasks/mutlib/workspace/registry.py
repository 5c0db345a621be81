"""Plugin registry: plugins are modules of the `plugins` package, loaded by name."""

import importlib
import os
import sys

PLUGIN_ENV = "MUTLIB_PLUGINS"


def plugin(name):
    if not name.isidentifier():
        raise ValueError(f"bad plugin name {name!r}")
    return importlib.import_module("plugins" + name)


def value_of(name):
    return plugin(name).VALUE


if __name__ == "__main__":
    for arg in os.environ.get(PLUGIN_ENV, "").split():
        print(arg, value_of(arg))
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: plugins may hold threads
