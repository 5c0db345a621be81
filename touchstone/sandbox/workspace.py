"""Host-side file operations on a sandbox workspace. The sandboxed code can create
symlinks, FIFOs and devices-looking names in its workspace, so nothing here ever
follows a symlink or opens anything but a regular file: every path is walked one
component at a time with O_NOFOLLOW relative to a directory descriptor."""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, Field

from touchstone.sandbox.errors import SandboxError, WorkspaceRefused

# Contents kept for unified diffs: text files up to this size.
MAX_DIFF_BYTES = 1 << 20
# A diff's whole patch, at most: more is refused (WorkspaceRefused), never cut.
MAX_PATCH_BYTES = 32 << 20
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class WorkspaceDiff(BaseModel):
    """Changes between two snapshots of a workspace: the one diff record. The
    sandbox's `diff()` fills every field, and a trajectory records it for its
    final workspace; the harness's `diff_snapshots` compares digests only
    (interpreter caches left out), so its `binary` and `patch` stay empty."""

    created: list[str] = Field(default_factory=list)
    modified: list[str] = Field(default_factory=list)
    deleted: list[str] = Field(default_factory=list)
    binary: list[str] = Field(default_factory=list)  # changed paths left out of `patch` (binary, large, symlinks)
    patch: str = ""  # git-style unified diff of the changed text files (`git apply` reads it)

    @property
    def changed(self) -> list[str]:
        return sorted(self.created + self.modified + self.deleted)

    @property
    def empty(self) -> bool:
        return not (self.created or self.modified or self.deleted)

    def summary(self) -> str:
        return f"{len(self.created)} created, {len(self.modified)} modified, {len(self.deleted)} deleted"


# ---------------------------------------------------------------- paths


def split_relative(rel: str | os.PathLike) -> list[str]:
    """Components of a workspace-relative path; absolute paths and `..` are refused.
    `/workspace/x` is accepted as `x`, since that is how the sandbox names it."""
    text = os.fspath(rel)
    if text.startswith("/workspace/"):
        text = text[len("/workspace/") :]
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
                raise SandboxError(
                    f"{'/'.join(parts)}: {part!r} is not a directory inside the workspace ({exc.strerror})"
                ) from exc
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


def mount_quota(path: Path, size: int, entries: int) -> bool:
    """Make `path` a tmpfs of `size` bytes and `entries` inodes, so the sandbox
    (either backend binds this directory) gets ENOSPC at the workspace limits.
    Needs root; returns False where mounting is not allowed, and the limits are
    then enforced only per file (RLIMIT_FSIZE), on harness writes and walks."""
    path.mkdir(mode=0o755)
    if os.geteuid() != 0:
        return False
    opts = f"size={size},nr_inodes={entries + 1},mode=0755,nosuid,nodev"  # +1: the root directory
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "touchstone-workspace", str(path)], capture_output=True)
    return done.returncode == 0


def unmount_quota(path: Path) -> None:
    subprocess.run(["umount", "--lazy", str(path)], capture_output=True, check=True)


@contextmanager
def bounded_dir(path: Path, max_bytes: int, max_entries: int, mode: int = 0o755) -> Iterator[Path]:
    """A new directory a sandbox may mount writable (`Mount(read_only=False)`): a
    tmpfs of `max_bytes` and `max_entries` inodes, unmounted at the end, so what
    the sandbox writes there never reaches the host's disk and counts as its
    memory. Without root it is a plain directory, and every sandbox it is mounted
    in names that among its unenforced limits."""
    quota = mount_quota(path, max_bytes, max_entries)
    try:
        path.chmod(mode)
        yield path
    finally:
        if quota:
            unmount_quota(path)


def is_bounded(path: Path, max_bytes: int, max_entries: int) -> bool:
    """Whether `path` is the root of a filesystem of its own with at most
    `max_bytes` of space and `max_entries` inodes besides its root directory, as
    `mount_quota` makes them (a tmpfs without a size says 0)."""
    if not os.path.ismount(path):
        return False
    fs = os.statvfs(path)
    return 0 < fs.f_blocks * fs.f_frsize <= max_bytes and 0 < fs.f_files <= max_entries + 1


# ---------------------------------------------------------------- walking

# What the harness walks, whatever the sandboxed code made: deeper trees, longer
# paths and names that JSON and patches cannot carry are refused by name.
MAX_DEPTH = 256
MAX_PATH_BYTES = 4095  # PATH_MAX less the terminating NUL
MAX_LINK_HOPS = 40  # the kernel's own limit on symlinks followed in one lookup


@dataclass(frozen=True)
class Budget:
    """Bounds on one walk: apparent bytes (st_size, so sparse files count in full)
    of regular files, and entries (files, directories, links, specials). Every
    name counts, hard links too: whatever the disk quota lets a tree hold, the
    harness copies, grades and exports each name at its apparent size. A tree
    over them is refused (`WorkspaceRefused`): the agent's outcome."""

    max_bytes: int
    max_entries: int


@dataclass(frozen=True)
class Entry:
    parts: tuple[str, ...]
    st: os.stat_result
    link: str | None = None  # a symlink's target text

    @property
    def rel(self) -> str:
        return "/".join(self.parts)


def show(rel: str) -> str:
    """A path for an error message: escaped, and shortened if very long."""
    text = ascii(rel)[1:-1] if not rel.isprintable() else rel
    return text if len(text) <= 200 else f"{text[:120]}...{text[-60:]} ({len(rel)} characters)"


def walk(root: Path, budget: Budget | None = None) -> Iterator[tuple[Entry, int]]:
    """Every entry below root with the descriptor of its directory, parents before
    children, names sorted. Iterative; each directory is opened relative to its
    parent's descriptor with O_NOFOLLOW, so no symlink (nor a directory swapped
    for one while we walk) ever leads out of root. Symlinks are reported, not entered."""
    seen_bytes = seen_entries = 0
    stack = [(os.open(root, _O_DIR), (), None)]
    try:
        while stack:
            fd, parts, names = stack[-1]
            if names is None:
                names = iter(sorted(_names(fd, parts)))
                stack[-1] = (fd, parts, names)
            name = next(names, None)
            if name is None:
                os.close(stack.pop()[0])
                continue
            entry = _entry(fd, (*parts, name))
            if entry is None:
                continue
            seen_entries += 1
            if stat.S_ISREG(entry.st.st_mode):
                seen_bytes += entry.st.st_size
            if budget and (seen_entries > budget.max_entries or seen_bytes > budget.max_bytes):
                raise WorkspaceRefused(
                    f"workspace is over its limits at {show(entry.rel)}: more than {budget.max_entries} entries "
                    f"or {budget.max_bytes} bytes of files (apparent size of each name: sparse files count in full, "
                    "and each name of a hard-linked file)"
                )
            yield entry, fd
            if stat.S_ISDIR(entry.st.st_mode):
                if len(entry.parts) >= MAX_DEPTH:
                    raise WorkspaceRefused(
                        f"directory {show(entry.rel)} is nested deeper than {MAX_DEPTH} levels; refused"
                    )
                stack.append((_open_sub(fd, entry), entry.parts, None))
    finally:
        for fd, _, _ in stack:
            os.close(fd)


def _names(fd: int, parts: tuple[str, ...]) -> list[str]:
    names = os.listdir(fd)
    for name in names:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise WorkspaceRefused(f"file name is not valid UTF-8: {show('/'.join((*parts, name)))}; refused") from None
    return names


def _entry(dir_fd: int, parts: tuple[str, ...]) -> Entry | None:
    """The entry, or None if it is gone since its directory was listed."""
    rel = "/".join(parts)
    if len(rel.encode()) > MAX_PATH_BYTES:
        raise WorkspaceRefused(f"path longer than {MAX_PATH_BYTES} bytes: {show(rel)}; refused")
    try:
        st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    try:
        link = os.readlink(parts[-1], dir_fd=dir_fd) if stat.S_ISLNK(st.st_mode) else None
    except OSError as exc:
        raise WorkspaceRefused(f"{show(rel)} changed while being read ({exc.strerror})") from exc
    return Entry(parts, st, link)


def _open_sub(dir_fd: int, entry: Entry) -> int:
    """The directory `entry`, and only if it is still the one we stat'ed."""
    try:
        fd = os.open(entry.parts[-1], _O_DIR, dir_fd=dir_fd)
    except OSError as exc:
        raise WorkspaceRefused(f"{show(entry.rel)} changed while being read ({exc.strerror})") from exc
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (entry.st.st_dev, entry.st.st_ino):
        os.close(fd)
        raise WorkspaceRefused(f"{show(entry.rel)} changed while being read")
    return fd


def open_regular(dir_fd: int, entry: Entry) -> int:
    """A read descriptor of the regular file `entry` (never a link, FIFO or device)."""
    try:
        fd = os.open(entry.parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        raise WorkspaceRefused(f"cannot read {show(entry.rel)}: {exc.strerror}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise WorkspaceRefused(f"{show(entry.rel)} changed while being read")
    return fd


def tree_bytes(root: Path) -> int:
    """Apparent size of the regular files below root."""
    return sum(e.st.st_size for e, _ in walk(root) if stat.S_ISREG(e.st.st_mode))


def link_escapes(entry: Entry, tree: dict[tuple[str, ...], Entry]) -> bool:
    """Whether the symlink `entry`, resolved the way the kernel would through the
    links of `tree` (the entries of one walk), leads outside the tree. Computed on
    what the walk recorded, never by following anything on disk."""
    where, todo, hops = list(entry.parts[:-1]), [entry.link], 0
    while todo:
        target = todo.pop()
        if target.startswith("/"):
            return True
        pending = [p for p in target.split("/") if p not in ("", ".")]
        while pending:
            part = pending.pop(0)
            if part == "..":
                if not where:
                    return True
                where.pop()
                continue
            where.append(part)
            found = tree.get(tuple(where))
            if found is not None and found.link is not None:
                hops += 1
                if hops > MAX_LINK_HOPS:
                    return True
                where.pop()
                todo.append("/".join(pending))
                todo.append(found.link)
                break
    return False


# ---------------------------------------------------------------- copying


def copy_tree(src: Path, dst: Path, owner: tuple[int, int] | None = None, budget: Budget | None = None) -> None:
    """Copy a workspace: regular files, directories, and symlinks that stay inside.
    Anything else (a link out, a FIFO, a device, a socket) is refused, and what was
    already copied removed again, so a refused tree leaves nothing behind. Existing
    directories in dst (mount points) are kept."""
    dst.mkdir(parents=True, exist_ok=True)
    if owner:
        os.chown(dst, *owner)
    made: list[tuple[str, ...]] = []
    try:
        _copy_entries(src, dst, owner, budget, made)
    except BaseException:
        # Only the tops of what was made: removing them removes what lies below, whose
        # full paths (dst + a path near PATH_MAX) may be too long to name.
        made_set = set(made)
        for parts in made:
            if parts[:-1] in made_set:
                continue
            target = dst.joinpath(*parts)
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target, ignore_errors=True)
            else:
                target.unlink(missing_ok=True)
        raise


def _copy_entries(
    src: Path, dst: Path, owner: tuple[int, int] | None, budget: Budget | None, made: list[tuple[str, ...]]
) -> None:
    tree: dict[tuple[str, ...], Entry] = {}
    links: list[Entry] = []
    out = [os.open(dst, _O_DIR)]  # out[d]: the destination directory at depth d
    try:
        for entry, src_fd in walk(src, budget):
            tree[entry.parts] = entry
            while len(out) > len(entry.parts):  # left the directories below this entry's parent
                os.close(out.pop())
            parent, name, mode = out[-1], entry.parts[-1], entry.st.st_mode
            if stat.S_ISDIR(mode):
                try:
                    os.mkdir(name, 0o755, dir_fd=parent)
                    made.append(entry.parts)
                except FileExistsError:
                    pass  # a mount point under the workspace
                out.append(os.open(name, _O_DIR, dir_fd=parent))
                if owner:
                    os.fchown(out[-1], *owner)
            elif stat.S_ISREG(mode):
                made.append(entry.parts)
                _copy_file(src_fd, entry, parent, owner)
            elif stat.S_ISLNK(mode):
                links.append(entry)
            else:
                raise WorkspaceRefused(f"{show(entry.rel)} is not a regular file, directory or symlink; refused")
        for entry in links:  # checked once the whole tree is known: a link may point ahead
            if link_escapes(entry, tree):
                raise WorkspaceRefused(
                    f"symlink {show(entry.rel)} -> {show(entry.link)} points outside the workspace; refused"
                )
            parent = os.open(dst.joinpath(*entry.parts[:-1]), _O_DIR) if len(entry.parts) > 1 else os.dup(out[0])
            try:
                made.append(entry.parts)
                os.symlink(entry.link, entry.parts[-1], dir_fd=parent)
                if owner:
                    os.chown(entry.parts[-1], *owner, dir_fd=parent, follow_symlinks=False)
            finally:
                os.close(parent)
    finally:
        for fd in out:
            os.close(fd)


def _copy_file(src_dir: int, entry: Entry, dst_dir: int, owner: tuple[int, int] | None) -> None:
    # Keep the executable bits (scripts); drop setuid/setgid/sticky.
    mode = 0o755 if entry.st.st_mode & 0o111 else 0o644
    reader = open_regular(src_dir, entry)
    try:
        writer = os.open(
            entry.parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dst_dir
        )
        try:
            while chunk := os.read(reader, 1 << 20):
                os.write(writer, chunk)
            os.fchmod(writer, mode)
            if owner:
                os.fchown(writer, *owner)
        finally:
            os.close(writer)
    finally:
        os.close(reader)


# ---------------------------------------------------------------- snapshots and diffs


def snapshot(root: Path, budget: Budget | None = None) -> dict[str, str]:
    """Relative path -> sha256 of every regular file and symlink (`link:` + digest of
    its target text). Special files are listed as `special:<kind>` so they show in
    diffs without being opened. Digests only: files are hashed as they are read,
    1 MiB at a time, and nothing of their contents is kept; the names of one
    file (hard links) are read once."""
    manifest: dict[str, str] = {}
    inodes: dict[tuple[int, int], str] = {}  # (device, inode) -> digest, for files with several names
    for entry, dir_fd in walk(root, budget):
        if stat.S_ISREG(entry.st.st_mode):
            inode = (entry.st.st_dev, entry.st.st_ino)
            digest = inodes.get(inode) or _hash_file(dir_fd, entry)
            if entry.st.st_nlink > 1:
                inodes[inode] = digest
            manifest[entry.rel] = digest
        elif entry.link is not None:
            manifest[entry.rel] = "link:" + hashlib.sha256(entry.link.encode()).hexdigest()
        elif not stat.S_ISDIR(entry.st.st_mode):
            manifest[entry.rel] = f"special:{stat.S_IFMT(entry.st.st_mode):o}"
    return manifest


def is_regular(digest: str | None) -> bool:
    """Whether a snapshot value names a regular file (not a link, a special
    file, or a path absent from the snapshot)."""
    return digest is not None and not digest.startswith(("link:", "special:"))


def _hash_file(dir_fd: int, entry: Entry) -> str:
    fd = open_regular(dir_fd, entry)
    digest = hashlib.sha256()
    try:
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


def read_blob(root: Path, rel: str, digest: str, limit: int = MAX_DIFF_BYTES) -> bytes | None:
    """The contents of the regular file root/rel if it is at most `limit`
    bytes and still has `digest` (a snapshot's), else None. Read when a diff
    needs it, never kept: a snapshot holds digests only."""
    try:
        parts = split_relative(rel)
        with _open_dir(root, parts[:-1], create=False, owner=None) as dir_fd:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except (OSError, SandboxError):
        return None  # gone, or no longer a file behind plain directories
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        data = handle.read(limit + 1)
    return data if len(data) <= limit and hashlib.sha256(data).hexdigest() == digest else None


Blob = Callable[[str, str], "bytes | None"]  # (relative path, digest) -> contents, or None


def diff(old: dict[str, str], new: dict[str, str], before: Blob, after: Blob) -> WorkspaceDiff:
    """Compare two snapshots; `before(rel, digest)` / `after(rel, digest)` read a
    file's contents on each side (None: not available as text, listed in
    `binary`). A patch over MAX_PATCH_BYTES is refused (`WorkspaceRefused`):
    cut short, it would grade a tree without some of the changes."""
    created = sorted(set(new) - set(old))
    deleted = sorted(set(old) - set(new))
    modified = sorted(p for p in set(old) & set(new) if old[p] != new[p])
    patches, binary, size = [], [], 0
    for path in sorted(created + deleted + modified):
        old_text = _text(path, old.get(path), before)
        new_text = _text(path, new.get(path), after)
        if old_text is None or new_text is None:
            binary.append(path)
            continue
        patches.append(_file_patch(path, old_text, new_text, path not in old, path not in new))
        size += len(patches[-1].encode())
        if size > MAX_PATCH_BYTES:
            raise WorkspaceRefused(
                f"the workspace's changes are more than a {MAX_PATCH_BYTES}-byte patch (at {show(path)}); refused"
            )
    return WorkspaceDiff(created=created, modified=modified, deleted=deleted, binary=binary, patch="".join(patches))


def _text(rel: str, digest: str | None, blob: Blob) -> str | None:
    """File text for diffing: "" for an absent side, None when not diffable as text."""
    if digest is None:
        return ""
    if not is_regular(digest):
        return None
    data = blob(rel, digest)
    if data is None or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _file_patch(path: str, before: str, after: str, is_new: bool, is_gone: bool) -> str:
    a, b = quote_path("a/" + path), quote_path("b/" + path)
    header = f"diff --git {a} {b}\n"
    if is_new:
        header += "new file mode 100644\n"
    if is_gone:
        header += "deleted file mode 100644\n"
    if before == after:  # an empty file created or deleted
        return header
    lines = []
    for line in difflib.unified_diff(
        patch_lines(before),
        patch_lines(after),
        "/dev/null" if is_new else a,
        "/dev/null" if is_gone else b,
    ):
        lines.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return header + "".join(lines)


def patch_lines(text: str) -> list[str]:
    """Lines as git sees them: split after each \\n only, ends kept. Not
    `str.splitlines`, which also splits at \\r, form feeds, \\x1c-\\x1e, \\x85
    and U+2028/U+2029: a patch made from those lines does not apply."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


_C_ESCAPES = {
    0x07: "\\a",
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0B: "\\v",
    0x0C: "\\f",
    0x0D: "\\r",
    0x22: '\\"',
    0x5C: "\\\\",
}


def quote_path(path: str) -> str:
    """A patch header path as git writes it: as is, or in double quotes with C
    escapes when it holds control characters, quotes, backslashes or non-ASCII
    bytes; so a file name with a newline cannot start a line of its own."""
    data = path.encode("utf-8")
    if all(0x20 <= byte < 0x7F and byte not in _C_ESCAPES for byte in data):
        return path
    quoted = "".join(_C_ESCAPES.get(byte) or (chr(byte) if 0x20 <= byte < 0x7F else f"\\{byte:03o}") for byte in data)
    return f'"{quoted}"'


def export_tree(root: Path, dest: Path, budget: Budget | None = None) -> None:
    """Copy the workspace out (links out of it refused); dest must be new or empty."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise SandboxError(f"export destination exists and is not an empty directory: {dest}")
    copy_tree(root, dest, budget=budget)
