"""The candidate's side: serve the judge's requests on the workspace's modules.

usage: python3 -s -m <pkg>.server SOCKET_PATH WORKSPACE_ROOT RANDOM_SEED [TMP_ROOT]

Runs in the candidate's sandbox, which holds the graded workspace (pristine +
the candidate's diff, no hidden tests) and cannot see the judge's results. TMP_ROOT is its own copy of the tests'
temporary directory (`tmpsync`), kept alike with the judge's through the wire.
Whatever the candidate's code does to this process (it may rewrite this very
server) changes only what it answers, and answers are decoded by the judge's
type-strict rules: the candidate cannot reach the process that decides.
"""

import importlib
import os
import random
import socket
import sys

from . import tmpsync, wire

ACCEPT_TIMEOUT_S = 120.0


def _importer(root: str):
    def load(name: str, entry):
        if entry is not None:
            path = os.path.normpath(os.path.join(root, wire._str(entry)))
            if path != root and not path.startswith(root + "/"):
                raise ImportError(f"import path {entry!r} lies outside the workspace")
            if path not in sys.path:
                sys.path.insert(0, path)
        return importlib.import_module(name)

    return load


def main(argv: list[str]) -> None:
    path, root = argv[0], os.path.abspath(argv[1])
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o777)  # the judge's sandbox user connects
    server.listen(1)
    server.settimeout(ACCEPT_TIMEOUT_S)
    conn, _ = server.accept()
    server.close()
    conn.settimeout(None)
    if len(argv) > 2:  # the run's seed of `random`: the lockstep comparison replays the reference under it
        random.seed(int(argv[2]))
    endpoint = wire.Endpoint(conn, importer=_importer(root), root=root)
    if len(argv) > 3:
        endpoint.channel.sync = tmpsync.TmpSync(argv[3], accept_links=True)
    endpoint.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
