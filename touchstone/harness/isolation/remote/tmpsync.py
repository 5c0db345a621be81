"""Each side of an isolated run has its own copy of the tests' temporary
directory (pytest's basetemp, so every `tmp_path`), at the same path in both
sandboxes; the two copies are kept alike through the wire, never by sharing a
folder.

Every frame either side sends carries what changed in its copy since its last
frame (`Channel.sync`): regular files by content, directories, deletions. The
receiver applies that before it reads the frame, so at each hand-over (a call
into candidate code, its reply, a callback) the other side sees the files as
they are, as it would in one process. Nothing else crosses: the candidate's
sandbox holds no folder of the judge's, and a symbolic link, FIFO or device
candidate code makes in its copy never reaches the judge's (links the tests
make do reach the candidate's copy: its own sandbox is where they point).
Every path is applied one component at a time with O_NOFOLLOW under the
receiver's root, so a name can never lead outside it.

Standard library only: copied into both sandboxes with the wire.
"""

import base64
import contextlib
import os
import stat
import threading

MAX_ENTRIES = 4096  # as many as the tmpfs that holds each copy takes
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class SyncRefused(Exception):
    """A change the other side sent cannot be applied (a bad name, a type clash)."""


class TmpSync:
    def __init__(self, root: str, accept_links: bool):
        self.root = os.path.abspath(root)
        self.accept_links = accept_links  # the candidate's side takes the tests' links; the judge's never
        self.seen: dict[str, tuple] = {}  # rel -> state at the last frame either way
        self.lock = threading.RLock()
        self.local = threading.local()

    def active(self) -> bool:
        """Whether this thread is copying files for the wire right now."""
        return getattr(self.local, "active", False)

    # ---------------------------------------------------------------- sending

    def delta(self) -> list:
        """What changed in this side's copy since the last frame, as plain data."""
        with self.lock, self._busy():
            now = self._scan()
            changes: list = [["x", rel] for rel in sorted(self.seen.keys() - now.keys(), reverse=True)]
            for rel in sorted(now):
                if now[rel] == self.seen.get(rel):
                    continue
                entry = self._entry(rel, now[rel])
                if entry is None:  # gone (or changed type) since the scan: the next frame carries it
                    now.pop(rel)
                    continue
                changes.append(entry)
            self.seen = now
            return changes

    @contextlib.contextmanager
    def _busy(self):
        self.local.active = True
        try:
            yield
        finally:
            self.local.active = False

    def _entry(self, rel: str, state: tuple) -> list | None:
        full = os.path.join(self.root, rel)
        try:
            if state[0] == "d":
                return ["d", rel, state[1]]
            if state[0] == "l":
                return ["l", rel, os.readlink(full)]
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                return ["f", rel, state[1], base64.b64encode(f.read()).decode("ascii")]
        except OSError:
            return None

    def _scan(self) -> dict[str, tuple]:
        out: dict[str, tuple] = {}
        pending = [""]
        while pending:
            rel = pending.pop()
            try:
                with os.scandir(os.path.join(self.root, rel)) as entries:
                    for e in entries:
                        sub = f"{rel}/{e.name}" if rel else e.name
                        st = e.stat(follow_symlinks=False)
                        mode = st.st_mode & 0o777
                        if stat.S_ISDIR(st.st_mode):
                            out[sub] = ("d", mode)
                            pending.append(sub)
                        elif stat.S_ISREG(st.st_mode):
                            out[sub] = ("f", mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
                        elif stat.S_ISLNK(st.st_mode):
                            out[sub] = ("l", st.st_mtime_ns, st.st_ino)
                        if len(out) > MAX_ENTRIES:
                            return out
            except OSError:  # removed under the walk: its absence is what the next frame says
                continue
        return out

    # -------------------------------------------------------------- receiving

    def apply(self, changes) -> None:
        """Apply the other side's changes to this copy (raises SyncRefused)."""
        if type(changes) is not list or len(changes) > MAX_ENTRIES + 1:
            raise SyncRefused("the file changes are not a list of entries")
        with self.lock, self._busy():
            for entry in changes:
                if type(entry) is not list or not entry or entry[0] not in ("x", "d", "f", "l"):
                    raise SyncRefused(f"malformed file change {str(entry)[:80]}")
                rel = _checked(entry[1] if len(entry) > 1 else None)
                if entry[0] == "l" and not self.accept_links:
                    continue  # a link made by candidate code never enters the judge's copy
                parts = rel.split("/")
                fd = self._open_parent(parts[:-1], create=entry[0] != "x")
                if fd is None:  # a deletion under a directory this copy does not hold: nothing to do
                    continue
                try:
                    self._apply_at(fd, parts[-1], entry)
                finally:
                    os.close(fd)
                self._note(rel, entry[0])

    def _apply_at(self, fd: int, name: str, entry: list) -> None:
        kind = entry[0]
        try:
            if kind == "x":
                _remove_at(fd, name)
            elif kind == "d":
                try:
                    os.mkdir(name, _mode(entry, 2), dir_fd=fd)
                except FileExistsError:
                    if not stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                        _remove_at(fd, name)
                        os.mkdir(name, _mode(entry, 2), dir_fd=fd)
                os.chmod(name, _mode(entry, 2), dir_fd=fd, follow_symlinks=False)
            elif kind == "f":
                data = base64.b64decode(_text(entry, 3), validate=True)
                _remove_unless_file(fd, name)
                out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                              _mode(entry, 2), dir_fd=fd)  # fmt: skip
                with os.fdopen(out, "wb") as f:
                    f.write(data)
                os.chmod(name, _mode(entry, 2), dir_fd=fd, follow_symlinks=False)
            else:
                _remove_at(fd, name)
                os.symlink(_text(entry, 2), name, dir_fd=fd)
        except (OSError, ValueError) as exc:
            raise SyncRefused(f"cannot apply {kind} {name!r}: {exc}") from None

    def _open_parent(self, parts: list[str], create: bool) -> int | None:
        """A descriptor of the directory `parts` under the root, reached one
        component at a time without following links (missing ones made when
        `create`, else None)."""
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for part in parts:
                try:
                    inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        os.close(fd)
                        return None
                    os.mkdir(part, 0o700, dir_fd=fd)
                    inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = inner
        except OSError as exc:
            os.close(fd)
            raise SyncRefused(f"cannot reach {'/'.join(parts)!r} in the tests' temporary directory: {exc}") from None
        return fd

    def _note(self, rel: str, kind: str) -> None:
        """This copy now holds what the other side has: not a change to send back."""
        if kind == "x":
            for key in [k for k in self.seen if k == rel or k.startswith(rel + "/")]:
                del self.seen[key]
            return
        try:
            st = os.stat(os.path.join(self.root, rel), follow_symlinks=False)
        except OSError:
            return
        mode = st.st_mode & 0o777
        self.seen[rel] = {"d": ("d", mode), "l": ("l", st.st_mtime_ns, st.st_ino)}.get(
            kind, ("f", mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        )


def _checked(rel) -> str:
    if type(rel) is not str or not rel or len(rel) > 4096 or "\0" in rel or rel.startswith("/"):
        raise SyncRefused(f"bad path in a file change: {str(rel)[:80]!r}")
    if any(part in ("", ".", "..") for part in rel.split("/")):
        raise SyncRefused(f"bad path in a file change: {rel[:80]!r}")
    return rel


def _mode(entry: list, i: int) -> int:
    mode = entry[i] if len(entry) > i else None
    if type(mode) is not int or not 0 <= mode <= 0o777:
        raise SyncRefused("bad mode in a file change")
    return mode | 0o600  # this side must be able to read and rewrite what it holds


def _text(entry: list, i: int) -> str:
    value = entry[i] if len(entry) > i else None
    if type(value) is not str:
        raise SyncRefused("malformed file change")
    return value


def _remove_unless_file(fd: int, name: str) -> None:
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        _remove_at(fd, name)


def _remove_at(fd: int, name: str) -> None:
    """Remove `name` under the directory `fd` without following any link."""
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=fd)
        return
    sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
    try:
        for child in os.listdir(sub):
            _remove_at(sub, child)
    finally:
        os.close(sub)
    os.rmdir(name, dir_fd=fd)
