"""What runs on the host, seen from outside every sandbox."""

from __future__ import annotations

import subprocess


def host_processes(marker: str) -> list[str]:
    """Host processes whose command line holds `marker`; bwrap itself (whose
    command line ends with the sandboxed command) is not one of them."""
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [
        line
        for line in out.splitlines()
        if marker in line and "ps -eo" not in line and not line.startswith("/usr/bin/bwrap ")
    ]
