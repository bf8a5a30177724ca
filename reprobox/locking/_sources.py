"""Where pip and uv look for packages, and whether any of it answers before either is asked.

pip's own configuration (its files and PIP_* variables, as `pip config list` reports them) names the
index, extra indexes, find-links, no-index and constraints; uv is given the same, so both see the same
packages. With no network both retry for seconds before they say so; a connection to each remote
index, tried all at once for at most a few seconds, says it at once (a refused connection or a name that
does not resolve answers in milliseconds). Then a wheelhouse at hand is locked from alone, offline,
and with none, one sentence says what to do.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import SplitResult, unquote, urlsplit

from reprobox import progress
from reprobox.errors import EnvironmentProblem
from reprobox.locking._target import Target
from reprobox.offline import WHEELHOUSE_VARIABLE

DEFAULT_INDEX = "https://pypi.org/simple"  # pip's and uv's, where nothing names another
PROBE_SECONDS = 3.0  # long enough for a cold DNS lookup and a connection; a dead network says so sooner
_TRUE = frozenset({"1", "true", "yes", "on"})
_PIP_SECTIONS = ("global", "install", ":env:")  # pip's `config list` sections an install reads, in order
_PIP_KEYS = frozenset({"index-url", "extra-index-url", "find-links", "no-index", "constraint", "proxy"})
_REMOTE = ("http", "https")


@dataclass(frozen=True)
class IndexSettings:
    """Where pip would look for packages, from its configuration and variables."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    constraints: tuple[str, ...] = ()
    proxy: str | None = None  # pip's own; the *_proxy variables apply besides

    def flags(self) -> list[str]:
        """The same settings as uv's (and pip's) command-line flags."""
        flags = ["--no-index"] if self.no_index else []
        if self.index_url:
            flags += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            flags += ["--extra-index-url", url]
        for source in self.find_links:
            flags += ["--find-links", source]
        for constraint in self.constraints:
            flags += ["--constraint", constraint]
        return flags

    def sources(self, target: Target) -> list[str]:
        """Every index and find-links source a lock for `target` reads: the indexes only without
        --no-index (pip's default index where none is named)."""
        found = [*self.find_links, *target.find_links]
        if not (self.no_index or target.no_index):
            found += [self.index_url or DEFAULT_INDEX, *self.extra_index_urls]
        return found


def pip_settings(scratch: Path | None = None) -> IndexSettings:
    """The index settings of pip's own configuration (files and PIP_* variables), as pip reports them."""
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            env=env,
            cwd=scratch,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return IndexSettings()
    return parse_pip_config(done.stdout if done.returncode == 0 else "")


def parse_pip_config(listing: str) -> IndexSettings:
    """`pip config list` lines (`section.key='value'`), later ones winning as they win in pip."""
    values: dict[str, str] = {}
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if section in _PIP_SECTIONS and name in _PIP_KEYS:
            values[name] = value.strip().strip("'\"")
    return IndexSettings(
        index_url=values.get("index-url") or None,
        extra_index_urls=tuple(values.get("extra-index-url", "").split()),
        find_links=tuple(values.get("find-links", "").split()),
        no_index=values.get("no-index", "").lower() in _TRUE,
        constraints=tuple(values.get("constraint", "").split()),
        proxy=values.get("proxy") or None,
    )


def usable_target(settings: IndexSettings, target: Target, wheelhouse: Path | None) -> Target:
    """`target` as given where a remote index answers, or where none is read or a local source is at
    hand; else the wheelhouse alone (offline), where one holds wheels; else one sentence, at once."""
    sources = settings.sources(target)
    remote = [source for source in sources if urlsplit(source).scheme in _REMOTE]
    if not remote:
        return target
    answered, reasons = any_answers(remote, settings.proxy)
    if answered:
        return target
    local = [source for source in sources if _local_folder(source) is not None]
    why = "; ".join(reasons[:3]) + ("; ..." if len(reasons) > 3 else "")
    if wheelhouse is not None and any(wheelhouse.glob("*.whl")):
        progress.say(f"no package index answers ({why}): locking from the wheelhouse {wheelhouse}, offline")
        kept = tuple(source for source in target.find_links if source in local)
        return replace(target, find_links=(str(wheelhouse), *kept), no_index=not local)
    if local:
        return target  # a local index or find-links folder may hold them all: pip and uv read those
    raise EnvironmentProblem(
        f"no package index answers ({why}), so nothing can be locked or fetched here; run reprobox lock "
        f"where the index answers, or give it a wheelhouse that holds the wheels ({WHEELHOUSE_VARIABLE} "
        "or --wheelhouse DIR, filled by `reprobox lock --wheelhouse DIR` where the index answers), or "
        "pass --no-index --find-links DIR"
    )


def any_answers(
    urls: Sequence[str], proxy: str | None = None, seconds: float = PROBE_SECONDS
) -> tuple[bool, list[str]]:
    """Whether a connection to any of `urls` (through its proxy, where one applies) opens within
    `seconds`; where none does, why each did not (`host:port: reason`). All are tried at once, in
    threads that never hold up the exit (a name lookup cannot be bounded otherwise)."""
    endpoints = list(dict.fromkeys(filter(None, (_endpoint(url, proxy) for url in urls))))
    results: queue.Queue[tuple[str, str | None]] = queue.Queue()
    for host, port in endpoints:
        threading.Thread(target=_connect, args=(host, port, seconds, results), daemon=True).start()
    deadline = time.monotonic() + seconds
    reasons: dict[str, str] = {}
    for _ in endpoints:
        try:
            where, problem = results.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if problem is None:
            return True, []
        reasons[where] = problem
    silent = [f"{host}:{port}" for host, port in endpoints if f"{host}:{port}" not in reasons]
    return False, [f"{where}: {why}" for where, why in reasons.items()] + [
        f"{where}: no answer in {seconds:g} s" for where in silent
    ]


def _connect(host: str, port: int, seconds: float, results: queue.Queue[tuple[str, str | None]]) -> None:
    where = f"{host}:{port}"
    try:
        with socket.create_connection((host, port), timeout=seconds):
            results.put((where, None))
    except OSError as exc:
        results.put((where, _reason(exc, seconds)))


def _reason(exc: OSError, seconds: float) -> str:
    if isinstance(exc, TimeoutError | socket.timeout):
        return f"no answer in {seconds:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return (exc.strerror or str(exc) or type(exc).__name__).rstrip(".").lower()


def _endpoint(url: str, proxy: str | None) -> tuple[str, int] | None:
    """The host and port a connection to `url` opens: its proxy's, where one applies."""
    parts = urlsplit(url)
    if parts.scheme not in _REMOTE or not parts.hostname:
        return None
    via = proxy or _environment_proxy(parts)
    if via:
        parts = urlsplit(via if "://" in via else f"http://{via}")
        if not parts.hostname:
            return None
    try:
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    return (host, port or (443 if parts.scheme == "https" else 80)) if host else None


def _environment_proxy(parts: SplitResult) -> str | None:
    """The proxy the *_proxy variables give `parts`' scheme, unless no_proxy names its host."""
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies_environment().get(parts.scheme)


def _local_folder(source: str) -> Path | None:
    """The folder of a local source (a path, or a file:// URL) where it exists."""
    parts = urlsplit(source)
    if parts.scheme in _REMOTE:
        return None
    path = Path(unquote(parts.path)) if parts.scheme == "file" else Path(source)
    return path if path.is_dir() else None
