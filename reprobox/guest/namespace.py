"""Enter a private mount namespace and bind a run's folders onto its stable paths: the guest's first step.

`python -m reprobox.guest --namespace SPEC.json -- COMMAND...` enters it before the guest imports the
rest of itself, so a namespaced run starts one interpreter, not a launcher that then execs the guest
(one interpreter start less, about 7 ms of CPU, for every run).

unshare(CLONE_NEWUSER) needs a single-threaded caller, which a fresh interpreter is, and the namespace
must be the job's, not the controller's. As root a mount namespace alone suffices; as any other user a
user namespace maps the caller's uid and gid to themselves, so files the job writes belong to the user
as before. The guest keeps the capabilities of its user namespace; the job's exec drops them, so the
job cannot undo a read-only bind. `python -I -S namespace.py --probe DIR` tries the same steps on DIR
and exits 0 when the kernel allows them all.

Standard library only, and no more of it than it uses (no pathlib, no typing): the probe runs it as a
plain script, without `site`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys

TYPE_CHECKING = False  # typing alone would cost this process a sixth of its start
if TYPE_CHECKING:
    import ctypes
    from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_RELATIME = 0x200000
# Flags a user namespace may not clear on a mount it inherited; a read-only remount must repeat them.
# statvfs reports them with the same bit values (ST_NOSUID == MS_NOSUID, ...).
LOCKED_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME | MS_RELATIME
EXIT_SETUP_FAILED = 125  # like `env`/`unshare`: entering the namespace failed, the command never ran


class SetupFailed(Exception):
    """A step of the namespace set-up was refused; the message names the step and the kernel's reason."""


def _libc() -> ctypes.CDLL:
    """libc with the argument types of the calls made here; ctypes is imported only where a call is made,
    since the controller imports this module for its constants."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare.argtypes = [ctypes.c_int]
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return libc


def _check(result: int, step: str) -> None:
    if result != 0:
        import ctypes

        code = ctypes.get_errno()
        raise SetupFailed(f"{step}: {os.strerror(code)} ({errno.errorcode.get(code, code)})")


def unshare(flags: int) -> None:
    _check(_libc().unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def raw(text: str | None) -> bytes | None:
        return None if text is None else os.fsencode(text)

    _check(_libc().mount(raw(source), raw(target), raw(fstype), flags, raw(data)), f"mount {target}")


def sethostname(name: str) -> None:
    raw = name.encode()
    _check(_libc().sethostname(raw, len(raw)), f"sethostname {name}")


def enter_namespace(*, user_namespace: bool | None, extra_flags: int = 0) -> bool:
    """Enter a new mount namespace (with a user namespace when needed); returns whether one was made.

    None means: a plain mount namespace when root, falling back to a user namespace when refused.
    `extra_flags` asks for more namespaces at the same time (CLONE_NEWUTS for a host name of the job's own).
    """
    uid, gid = os.geteuid(), os.getegid()
    if user_namespace is None and uid == 0:
        try:
            unshare(CLONE_NEWNS | extra_flags)
            return False
        except SetupFailed:
            pass  # root without CAP_SYS_ADMIN (a container): a user namespace may still be allowed
    if user_namespace is False:
        unshare(CLONE_NEWNS | extra_flags)
        return False
    unshare(CLONE_NEWUSER | CLONE_NEWNS | extra_flags)
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        raise SetupFailed(f"mapping uid {uid} and gid {gid} into the user namespace: {exc.strerror}") from exc
    return True


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def _inside(path: str, top: str) -> bool:
    """Whether `path` lies in `top`, by their names alone (as PurePath.is_relative_to judges it)."""

    def parts(name: str) -> list[str]:
        return [part for part in name.split("/") if part not in ("", ".")]

    return path.startswith("/") == top.startswith("/") and parts(path)[: len(parts(top))] == parts(top)


def _make_target(target: str, *, folder: bool) -> None:
    """The folder or empty file a bind mounts onto (whatever is there already is kept)."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if folder:
        with contextlib.suppress(FileExistsError):
            os.mkdir(target)
        if not os.path.isdir(target):
            raise FileExistsError(errno.EEXIST, "a file is in the way of a folder", target)
    else:
        try:
            os.utime(target)  # as Path.touch: one already there is only touched
        except OSError:
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o666))


def bind(source: str, target: str, *, read_only: bool) -> None:
    """Bind `source` (with the mounts under it) onto `target`; read-only binds need a second remount."""
    mount(source, target, None, MS_BIND | MS_REC)
    if read_only:
        locked = os.statvfs(target).f_flag & LOCKED_FLAGS
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | locked)


def set_up(spec: dict[str, Any]) -> bool:
    """Build the layout of `spec` in a fresh namespace: a tmpfs on its root, then one bind per folder.

    `hostname`, when given, is set in a UTS namespace of the job's own; `extra_roots` are folders outside
    the root that mounts may target too (a HOME moved elsewhere by a variation)."""
    hostname = spec.get("hostname")
    made_user_namespace = enter_namespace(
        user_namespace=spec.get("user_namespace"), extra_flags=CLONE_NEWUTS if hostname else 0
    )
    if hostname:
        sethostname(hostname)
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing we mount leaks back to the host
    root = spec["root"]
    allowed = [root, *spec.get("extra_roots", [])]
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for entry in spec["mounts"]:
        target = entry["target"]
        if not any(_inside(target, top) for top in allowed):
            raise SetupFailed(f"mount target {target} is outside the layout root {root}")
        _make_target(target, folder=os.path.isdir(entry["source"]))
        bind(entry["source"], target, read_only=bool(entry.get("read_only")))
    return made_user_namespace


def probe(directory: str, *, user_namespace: bool | None = None) -> None:
    """Try every kind of step a run needs (namespace, tmpfs, read-only bind) on `directory`."""
    spec: dict[str, Any] = {"root": directory, "user_namespace": user_namespace, "mounts": []}
    set_up(spec)
    source, target = os.path.join(directory, "source"), os.path.join(directory, "probe")
    os.mkdir(source)
    os.mkdir(target)
    bind(source, target, read_only=True)
    try:
        os.close(os.open(os.path.join(target, "write-test"), os.O_WRONLY | os.O_CREAT, 0o666))
    except OSError:
        return  # read-only, as it should be
    raise SetupFailed(f"a read-only bind onto {target} stayed writable")


def enter(spec_path: str) -> str | None:
    """Build the layout that ``spec_path`` describes in a fresh namespace and move into its code folder;
    None, or the one line that says why it could not (the run then exits EXIT_SETUP_FAILED)."""
    try:
        with open(spec_path, encoding="utf-8") as file:
            spec = json.load(file)
        set_up(spec)
        os.chdir(spec["cwd"])
    except (SetupFailed, OSError, ValueError, KeyError) as exc:
        return (
            f"reprobox: cannot give the job its stable paths in a private mount namespace: {exc}; "
            "set REPROBOX_LOCAL_ISOLATION=fixed to use fixed folders instead"
        )
    return None


def main(argv: list[str]) -> int:
    """``--probe DIR``: whether this machine lets a run build its layout in a private namespace."""
    if len(argv) != 2 or argv[0] != "--probe":
        sys.stderr.write("usage: python -I -S namespace.py --probe DIR\n")
        return 2
    try:
        probe(argv[1])
    except (SetupFailed, OSError) as exc:
        sys.stderr.write(f"reprobox: no private mount namespace here: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
