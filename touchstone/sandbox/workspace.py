"""Host-side file operations on a sandbox workspace. The sandboxed code can create
symlinks, FIFOs and devices-looking names in its workspace, so nothing here ever
follows a symlink or opens anything but a regular file: every path is walked one
component at a time with O_NOFOLLOW relative to a directory descriptor."""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from pydantic import BaseModel

from touchstone.sandbox.errors import SandboxError

# Contents kept for unified diffs: text files up to this size.
MAX_DIFF_BYTES = 1 << 20
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class WorkspaceDiff(BaseModel):
    created: list[str]
    modified: list[str]
    deleted: list[str]
    binary: list[str]  # changed paths left out of `patch` (binary, large, or symlinks)
    patch: str  # git-style unified diff of the changed text files (`git apply` reads it)

    @property
    def changed(self) -> list[str]:
        return sorted(self.created + self.modified + self.deleted)

    @property
    def empty(self) -> bool:
        return not (self.created or self.modified or self.deleted)


# ---------------------------------------------------------------- paths


def split_relative(rel: str | os.PathLike) -> list[str]:
    """Components of a workspace-relative path; absolute paths and `..` are refused.
    `/workspace/x` is accepted as `x`, since that is how the sandbox names it."""
    text = os.fspath(rel)
    if text.startswith("/workspace/"):
        text = text[len("/workspace/"):]
    path = PurePosixPath(text)
    parts = [p for p in path.parts if p not in ("", ".")]
    if path.is_absolute() or not parts or ".." in parts or "\0" in text:
        raise SandboxError(f"not a path inside the workspace: {text!r}")
    return parts


@contextmanager
def _open_dir(root: Path, parts: list[str], create: bool, owner: tuple[int, int] | None) -> Iterator[int]:
    """Descriptor of the directory root/parts[0]/..., never following a symlink."""
    fd = os.open(root, _O_DIR)
    try:
        for part in parts:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    if owner:
                        os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
            try:
                next_fd = os.open(part, _O_DIR, dir_fd=fd)
            except OSError as exc:
                raise SandboxError(f"{'/'.join(parts)}: {part!r} is not a directory inside the workspace ({exc.strerror})") from exc
            os.close(fd)
            fd = next_fd
        yield fd
    finally:
        os.close(fd)


def make_dirs(root: Path, parts: list[str], owner: tuple[int, int] | None) -> None:
    """root/parts[0]/... as directories (existing ones kept), never following a symlink."""
    with _open_dir(root, parts, create=True, owner=owner):
        pass


def read_file(root: Path, rel: str | os.PathLike) -> bytes:
    parts = split_relative(rel)
    with _open_dir(root, parts[:-1], create=False, owner=None) as dir_fd:
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            raise SandboxError(f"cannot read {'/'.join(parts)}: {exc.strerror}") from exc
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise SandboxError(f"cannot read {'/'.join(parts)}: not a regular file")
            return handle.read()


def write_file(root: Path, rel: str | os.PathLike, data: bytes, owner: tuple[int, int] | None) -> None:
    """Write (replace) a regular file, creating parent directories. A symlink (or
    FIFO...) at the target is replaced by the rename, never written through."""
    parts = split_relative(rel)
    with _open_dir(root, parts[:-1], create=True, owner=owner) as dir_fd:
        name = parts[-1]
        try:
            if stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
                raise SandboxError(f"cannot write {'/'.join(parts)}: it is a directory")
        except FileNotFoundError:
            pass
        # Write a temporary file and rename it over the target: a failed write (the
        # workspace is full) leaves the old content, not a truncated file.
        temp = f".{name}.touchstone-{os.getpid()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temp, flags, 0o644, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                if owner:
                    os.fchown(fd, *owner)
            os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            os.unlink(temp, dir_fd=dir_fd)
            raise


# ---------------------------------------------------------------- size quota


def mount_quota(path: Path, size: int) -> bool:
    """Make `path` a tmpfs of `size` bytes, so the sandbox (either backend binds
    this directory) gets ENOSPC at the workspace limit. Needs root; returns False
    where mounting is not allowed, and the limit is then enforced only per file
    (RLIMIT_FSIZE) and on harness writes."""
    path.mkdir(mode=0o755)
    if os.geteuid() != 0:
        return False
    opts = f"size={size},mode=0755,nosuid,nodev"
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "touchstone-workspace", str(path)],
                          capture_output=True)
    return done.returncode == 0


def unmount_quota(path: Path) -> None:
    subprocess.run(["umount", "--lazy", str(path)], capture_output=True, check=True)


# ---------------------------------------------------------------- copying


def _check_link(link: Path, root: Path) -> None:
    """A symlink may stay only if it resolves (fully, following other links) inside root."""
    target = os.path.realpath(link)
    real_root = os.path.realpath(root)
    if os.readlink(link).startswith("/") or os.path.commonpath([target, real_root]) != real_root:
        raise SandboxError(
            f"symlink {link.relative_to(root)} -> {os.readlink(link)} points outside the workspace; refused"
        )


def copy_tree(src: Path, dst: Path, owner: tuple[int, int] | None = None) -> None:
    """Copy a workspace: regular files, directories, and symlinks that stay inside.
    Anything else (a link out, a FIFO, a device, a socket) is refused, before
    anything is copied, so a refused tree leaves nothing half-copied behind."""
    entries = list(_walk(src))
    for path, st in entries:
        if stat.S_ISLNK(st.st_mode):
            _check_link(path, src)
        elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise SandboxError(f"{path.relative_to(src)} is not a regular file, directory or symlink; refused")
    dst.mkdir(parents=True, exist_ok=True)
    if owner:
        os.chown(dst, *owner)
    for path, st in entries:
        target = dst / path.relative_to(src)
        if stat.S_ISDIR(st.st_mode):
            target.mkdir(mode=0o755, exist_ok=True)  # a mount point under the workspace may be there already
        elif stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(path), target)
        else:
            _copy_file(path, target, st)
        if owner:
            os.chown(target, *owner, follow_symlinks=False)


def _copy_file(src: Path, dst: Path, st: os.stat_result) -> None:
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as reader, open(dst, "xb") as writer:
        while chunk := reader.read(1 << 20):
            writer.write(chunk)
    # Keep the executable bits (scripts); drop setuid/setgid/sticky.
    os.chmod(dst, 0o755 if st.st_mode & 0o111 else 0o644)


def _walk(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every entry below root (not root itself), parents before children, sorted;
    symlinks are reported, never entered."""
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        st = entry.stat(follow_symlinks=False)
        path = Path(entry.path)
        yield path, st
        if stat.S_ISDIR(st.st_mode):
            yield from _walk(path)


def tree_bytes(root: Path) -> int:
    return sum(st.st_size for _, st in _walk(root) if stat.S_ISREG(st.st_mode))


# ---------------------------------------------------------------- snapshots and diffs


def snapshot(root: Path, keep: Callable[[str, bytes], None] | None = None) -> dict[str, str]:
    """Relative path -> sha256 of every regular file and symlink (`link:` + digest of
    its target text). Special files are listed as `special:<kind>` so they show in
    diffs without being opened. `keep(digest, data)` receives small file contents."""
    manifest: dict[str, str] = {}
    for path, st in _walk(root):
        rel = path.relative_to(root).as_posix()
        if stat.S_ISREG(st.st_mode):
            data = read_file(root, rel)
            digest = hashlib.sha256(data).hexdigest()
            if keep and len(data) <= MAX_DIFF_BYTES:
                keep(digest, data)
            manifest[rel] = digest
        elif stat.S_ISLNK(st.st_mode):
            manifest[rel] = "link:" + hashlib.sha256(os.readlink(path).encode()).hexdigest()
        elif not stat.S_ISDIR(st.st_mode):
            manifest[rel] = f"special:{stat.S_IFMT(st.st_mode):o}"
    return manifest


def diff(old: dict[str, str], new: dict[str, str], blob: Callable[[str], bytes | None]) -> WorkspaceDiff:
    """Compare two snapshots; `blob(digest)` returns kept contents (or None)."""
    created = sorted(set(new) - set(old))
    deleted = sorted(set(old) - set(new))
    modified = sorted(p for p in set(old) & set(new) if old[p] != new[p])
    patches, binary = [], []
    for path in sorted(created + deleted + modified):
        before = _text(old.get(path), blob)
        after = _text(new.get(path), blob)
        if before is None or after is None:
            binary.append(path)
        else:
            patches.append(_file_patch(path, before, after, path not in old, path not in new))
    return WorkspaceDiff(created=created, modified=modified, deleted=deleted, binary=binary, patch="".join(patches))


def _text(digest: str | None, blob: Callable[[str], bytes | None]) -> str | None:
    """File text for diffing: "" for an absent side, None when not diffable as text."""
    if digest is None:
        return ""
    data = blob(digest)
    if data is None or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _file_patch(path: str, before: str, after: str, is_new: bool, is_gone: bool) -> str:
    header = f"diff --git a/{path} b/{path}\n"
    if is_new:
        header += "new file mode 100644\n"
    if is_gone:
        header += "deleted file mode 100644\n"
    if before == after:  # an empty file created or deleted
        return header
    lines = []
    for line in difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        "/dev/null" if is_new else f"a/{path}", "/dev/null" if is_gone else f"b/{path}",
    ):
        lines.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return header + "".join(lines)


def export_tree(root: Path, dest: Path) -> None:
    """Copy the workspace out (links out of it refused); dest must be new or empty."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise SandboxError(f"export destination exists and is not an empty directory: {dest}")
    copy_tree(root, dest)
