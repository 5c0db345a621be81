"""The harness's walks of an agent-made workspace (snapshot, diff, export): trees
it cannot walk are refused with a SandboxError naming the path, never a crash;
budgets count apparent size and entries; names cannot inject hunks into the
patch; and nothing outside the workspace is ever copied, even when the tree
changes under the walk."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from touchstone.sandbox import Limits, SandboxError, WorkspaceRefused, open_sandbox
from touchstone.sandbox import workspace as ws


def _all_walks_refuse(sb, tmp_path: Path, match: str) -> None:
    # a long destination: a refused copy is undone even where its deepest paths are too long to name
    out = tmp_path / ("long-destination-" * 8) / "out"
    for walk in (sb.snapshot, sb.diff, lambda: sb.export(out)):
        with pytest.raises(SandboxError, match=match):
            walk()
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("levels", [300, 1200])
def test_deep_tree_is_refused_by_name(sb, tmp_path: Path, levels: int):
    r = sb.exec(
        [
            "python3",
            "-c",
            f"import os\nfor _ in range({levels}): os.mkdir('deep'); os.chdir('deep')\n"
            "open('bottom.txt', 'w').write('x')",
        ]
    )
    assert r.exit_code == 0, r.stderr
    _all_walks_refuse(sb, tmp_path, r"deep/deep/deep.*nested deeper than 256 levels")
    sb.exec("rm -rf deep")
    assert sb.diff().empty  # the sandbox stays usable once the tree is gone


def test_path_longer_than_path_max_is_refused_by_name(sb, tmp_path: Path):
    script = "import os\nfor i in range(24): os.mkdir('L' * 200); os.chdir('L' * 200)\nopen('leaf', 'w').write('x')"
    assert sb.exec(["python3", "-c", script]).exit_code == 0
    _all_walks_refuse(sb, tmp_path, r"path longer than 4095 bytes: LLLL.*characters\)")
    assert sb.exec("ls").exit_code == 0


@pytest.mark.parametrize("name", [b"\xff\xfe.txt", b"ok/caf\xe9.py", b"\x80"])
def test_non_utf8_name_is_refused_by_name(sb, tmp_path: Path, name: bytes):
    script = f"import os\nname = {name!r}\nos.makedirs(os.path.dirname(name) or b'.', exist_ok=True)\nopen(name, 'w').close()"
    assert sb.exec(["python3", "-c", script]).exit_code == 0
    _all_walks_refuse(sb, tmp_path, r"not valid UTF-8: .*\\udc")


@pytest.mark.parametrize(
    "name",
    [
        "evil\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-first line\n+pwned",
        'tab\there "quoted" back\\slash',
        "ünïcode dir/naïve.py",
        "cr\rname\x01\x7f",
    ],
)
def test_control_characters_in_names_cannot_inject_hunks(sb, workspace: Path, name: str):
    sb.write_file(name, "content\n")
    d = sb.diff()
    assert d.created == [name] and d.modified == []
    for line in d.patch.splitlines():  # every line is a header or a hunk line of the one file
        assert line.startswith(('diff --git "a/', "diff --git a/", "new file", "--- ", "+++ ", "@@ ", "+content"))
    pristine = workspace.parent / "pristine"
    shutil.copytree(workspace, pristine)
    subprocess.run(["git", "apply", "-"], input=d.patch.encode(), cwd=pristine, check=True)
    assert (pristine / "notes.txt").read_text() == "first line\n"
    assert (pristine / name).read_text() == "content\n"
    patched = workspace.parent / "patched"
    shutil.copytree(workspace, patched)
    subprocess.run(["patch", "-p1", "-s"], input=d.patch.encode(), cwd=patched, check=True)
    assert (patched / "notes.txt").read_text() == "first line\n"


# Every character str.splitlines() splits at besides \n, and CRLF: lines to git.
LINE_BREAKS_GIT_DOES_NOT_SEE = ["\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def test_patches_keep_form_feeds_and_unicode_line_separators(sb, workspace: Path, tmp_path: Path):
    """The recorded patch, applied to the pristine tree, gives back the sandbox's
    bytes exactly: for a modified file that already held the characters, and a
    new one (a patch that fails to apply would silently lose every change)."""
    from touchstone.harness import apply_patch, compose_tree

    odd = "".join(f"line {i}{brk}tail {i}\n" for i, brk in enumerate(LINE_BREAKS_GIT_DOES_NOT_SEE))
    (workspace / "odd.py").write_text(odd, newline="")
    with open_sandbox(workspace, sb.backend) as box:
        box.write_file("odd.py", odd.replace("tail 3", "TAIL 3") + "end\x0cwithout newline")
        box.write_file("new.txt", "a\u2028b\x85c\rd\n")
        d = box.diff()
        assert d.modified == ["odd.py"] and d.created == ["new.txt"] and not d.binary
        tree = compose_tree(tmp_path / "graded", workspace)
        apply_patch(tree, d.patch)
        for rel in ("odd.py", "new.txt"):
            assert (tree / rel).read_bytes() == box.read_file(rel), rel


def test_sparse_files_count_at_their_apparent_size(workspace: Path, sandbox_backend: str, tmp_path: Path):
    with open_sandbox(workspace, sandbox_backend, limits=Limits(workspace_bytes="64m")) as box:
        r = box.exec("for i in 1 2 3 4; do truncate -s 60M sparse$i || exit 1; done; du -sk . | cut -f1")
        assert r.exit_code == 0 and int(r.stdout) < 1024, r  # four 60 MiB files, next to nothing allocated
        _all_walks_refuse(box, tmp_path, r"over its limits at sparse\d: .*67108864 bytes .*apparent size")
        box.exec("rm sparse2 sparse3 sparse4")
        assert box.diff().created == ["sparse1"]


# Trees the workspace quota on disk admits (one 1 MiB file; holes) that are
# past the 256 MiB limit at the apparent size of each name.
TREES_WITHIN_THE_QUOTA = {
    "hard_links": "head -c 1048576 /dev/urandom > one.bin && for i in $(seq 300); do ln one.bin link$i; done",
    "sparse_files": "truncate -s 200M sparse1 && truncate -s 200M sparse2",
}


@pytest.mark.parametrize("tree", sorted(TREES_WITHIN_THE_QUOTA))
def test_the_quota_admits_the_tree_and_the_harness_refuses_it_by_name(workspace, sandbox_backend, tree):
    with open_sandbox(workspace, sandbox_backend, limits=Limits(workspace_bytes="256m")) as sb:
        made = sb.exec(TREES_WITHIN_THE_QUOTA[tree] + " && du -sk . | cut -f1")
        assert made.exit_code == 0 and int(made.stdout) < 4096, made  # a few MiB on disk at most
        with pytest.raises(WorkspaceRefused, match="over its limits at (link|sparse)"):
            sb.snapshot()
        assert sb.exec("rm -f link* sparse*").exit_code == 0
        assert sb.diff().created == (["one.bin"] if tree == "hard_links" else [])


def test_hard_links_within_the_limits_are_read_once_and_diffed(workspace, sandbox_backend):
    with open_sandbox(workspace, sandbox_backend) as sb:
        assert sb.exec("seq 100000 > one.txt && for i in 1 2 3; do ln one.txt same$i.txt; done").exit_code == 0
        snap = sb.snapshot()
        assert len({snap[f"same{i}.txt"] for i in (1, 2, 3)} | {snap["one.txt"]}) == 1
        d = sb.diff()
        assert d.created == ["one.txt", "same1.txt", "same2.txt", "same3.txt"] and d.patch.count("+99999\n") == 4


def test_a_patch_over_its_bound_is_refused_not_cut(sb):
    """50 text files of a little under 1 MiB each: every one diffable, together
    more patch than the harness holds. Cut short, the patch would grade a tree
    without some of the changes; refused, it is the agent's outcome."""
    assert sb.exec("for i in $(seq 50); do seq 90000 | sed s/^/$i-/ > big$i.txt; done").exit_code == 0
    assert len(sb.snapshot()) > 50  # the walk itself is within its limits
    with pytest.raises(WorkspaceRefused, match=r"more than a 33554432-byte patch \(at big\d+\.txt\)"):
        sb.diff()
    assert sb.exec("rm big*.txt").exit_code == 0 and sb.diff().empty


def test_number_of_entries_is_bounded(workspace: Path, sandbox_backend: str, tmp_path: Path):
    with open_sandbox(workspace, sandbox_backend, limits=Limits(workspace_files=300)) as box:
        r = box.exec(
            "mkdir many; for i in $(seq 400); do : > many/f$i 2>/dev/null || break; done; find . -mindepth 1 | wc -l"
        )
        if int(r.stdout) > 300:  # no kernel quota here: the harness's walk is the bound
            _all_walks_refuse(box, tmp_path, "more than 300 entries")
        else:  # the workspace tmpfs ran out of inodes first
            assert len(box.snapshot()) <= 300 and "many/f1" in box.snapshot()
    root = tmp_path / "plain"
    root.mkdir()
    for i in range(60):
        (root / f"f{i}").write_text("x")
    with pytest.raises(SandboxError, match="more than 50 entries"):
        ws.snapshot(root, budget=ws.Budget(max_bytes=1 << 30, max_entries=50))


def test_export_of_a_tree_swapped_under_it_copies_nothing_from_the_host(tmp_path: Path):
    """The walker alone, with a tree changing while it walks (inside a sandbox the
    exec lock rules this out; this checks the walk does not depend on it): a
    directory swapped for a symlink to a host directory in a loop."""
    secret_dir = tmp_path / "host"
    secret_dir.mkdir()
    (secret_dir / "f").write_text("HOST SECRET")
    root = tmp_path / "ws"
    (root / "real").mkdir(parents=True)
    (root / "real" / "f").write_text("inside")
    os.symlink(secret_dir, root / "link")
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(root / "real", root / "tmp")
            os.rename(root / "link", root / "real")
            os.rename(root / "real", root / "link")
            os.rename(root / "tmp", root / "real")

    swapper = threading.Thread(target=swap)
    swapper.start()
    outcomes = set()
    try:
        for i in range(300):
            dest = tmp_path / f"out{i}"
            try:
                ws.export_tree(root, dest)
                outcomes.add("copied")
            except SandboxError as exc:
                outcomes.add(str(exc).split(":")[0][:40])
            for path in dest.rglob("*") if dest.exists() else []:
                if path.is_file() and not path.is_symlink():
                    assert path.read_text() != "HOST SECRET", path
    finally:
        stop.set()
        swapper.join()
    assert outcomes  # each attempt either copied only workspace files or refused


def test_export_waits_for_a_running_command_that_swaps_directories(sb, tmp_path: Path):
    swap = (
        "for i in $(seq 100); do rm -rf d; mkdir d; echo inside > d/f; rm -rf d; ln -s /etc d; done; "
        "rm -rf d; mkdir d; echo final > d/f"
    )
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(r=sb.exec(swap)))
    runner.start()
    time.sleep(0.2)
    try:
        out = sb.export(tmp_path / "out")  # waits for the command: the tree it copies is still
    except SandboxError as exc:  # only if the command timed out (a loaded machine) with d -> /etc
        out = None
        assert "points outside the workspace" in str(exc)
    runner.join()
    if result["r"].exit_code == 0:
        assert out is not None and (out / "d" / "f").read_text() == "final\n"
    else:
        assert result["r"].timed_out
    assert out is None or not any(p.name == "passwd" for p in out.rglob("*"))


def test_close_during_an_exec_lets_the_exec_finish(workspace: Path, sandbox_backend: str):
    box = open_sandbox(workspace, sandbox_backend)
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(r=box.exec("sleep 1; echo finished")))
    runner.start()
    time.sleep(0.3)
    box.close()
    runner.join()
    assert result["r"].exit_code == 0 and result["r"].stdout == "finished\n"
    with pytest.raises(SandboxError, match="closed"):
        box.exec("true")
    with pytest.raises(SandboxError, match="closed"):
        box.snapshot()
