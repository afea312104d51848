"""Released engine versions, side by side: a cache of isolated install directories.

``maskcert certify --backend xgrammar==0.1.19`` must not touch the user's environment. So a release is
installed with ``pip install --target DIR --no-deps`` into its own directory of a cache
(:func:`cache_root`: ``$MASKCERT_ENGINE_CACHE``, else ``~/.cache/maskcert/engines``), keyed by
distribution and version (``xgrammar-0.1.19``), and the backend's worker subprocess runs with that
directory first on ``sys.path`` (:class:`props.backends.worker.WorkerBackend` ``engine_path``), so the
adapter imports that release and :func:`props.backends._common.dist_version` reads its metadata.

Dependencies. ``--target`` with dependencies would install a second copy of everything (torch
included) into the directory. Instead the release goes in alone, and then, level by level, each
requirement of what is in the directory (``Requires-Dist``, markers evaluated, no extras) that the
environment does not already satisfy is installed there too, again alone. Requirements named in
:data:`PROVIDED` (torch, triton: large, and imported lazily or already pinned by maskcert) are never
installed; an unsatisfied one is recorded in the directory's manifest. A directory is complete when
its manifest (``maskcert-engine.json``) exists: it is written last, after an atomic rename of the
temporary directory, so an interrupted install is never mistaken for a cached one.

Released versions come from ``pip index versions NAME`` (the configured index, so a private mirror
works), cached for a day in ``versions/<distribution>.json`` under the cache root.

Errors are :class:`EngineInstallError` (pip failed: no network, a build failure) and its subclass
:class:`UnknownEngineVersion` (no such release), both naming the engine, the version and pip's last
words.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import PathDistribution, distributions
from pathlib import Path
from typing import Any

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from refdecoder.errors import MaskcertError

__all__ = [
    "CACHE_ENV",
    "PROVIDED",
    "EngineInstallError",
    "UnknownEngineVersion",
    "EngineRequest",
    "parse_request",
    "cache_root",
    "engine_dir",
    "cached_engine",
    "install_engine",
    "released_versions",
    "MANIFEST",
]

#: The environment variable that moves the cache.
CACHE_ENV = "MASKCERT_ENGINE_CACHE"
#: The file that marks a complete install directory.
MANIFEST = "maskcert-engine.json"
#: Requirements never installed into an engine directory: the environment provides them.
PROVIDED = frozenset({"torch", "triton", "nvidia-cudnn-cu12", "mlx"})
_VERSIONS_TTL_S = 24 * 3600
_MAX_LEVELS = 6


class EngineInstallError(MaskcertError, RuntimeError):
    """pip could not install ``distribution==version`` into the engine cache; ``detail`` is why."""

    def __init__(self, distribution: str, version: str, detail: str) -> None:
        self.distribution = distribution
        self.version = version
        self.detail = detail
        super().__init__(
            f"cannot install {distribution}=={version} into the engine cache ({cache_root()}): {detail}. "
            f"Expected a released version and a reachable package index (pip install works); set "
            f"{CACHE_ENV} to use another cache directory"
        )


class UnknownEngineVersion(EngineInstallError):
    """``version`` is not a release of ``distribution`` on the package index."""


@dataclass(frozen=True)
class EngineRequest:
    """``NAME`` or ``NAME==VERSION`` as given to ``--backend``."""

    name: str
    version: str | None

    def __str__(self) -> str:
        return self.name if self.version is None else f"{self.name}=={self.version}"


_REQUEST = re.compile(r"^\s*([A-Za-z0-9_.:\-]+?)\s*(?:==\s*([A-Za-z0-9_.+!\-]+))?\s*$")


def parse_request(text: str) -> EngineRequest:
    """``"xgrammar==0.1.19"`` -> ``EngineRequest("xgrammar", "0.1.19")``; a plain name has no version.
    A ``module:Class`` adapter never has one. Raises ``ValueError`` for anything else (``>=``,
    an invalid version)."""
    m = _REQUEST.match(text)
    if m is None:
        raise ValueError(
            f"{text!r}: expected NAME or NAME==VERSION (one exact release, e.g. xgrammar==0.1.19)"
        )
    name, version = m.group(1), m.group(2)
    if version is not None:
        if ":" in name:
            raise ValueError(f"{text!r}: a module:Class adapter takes no version")
        try:
            Version(version)
        except InvalidVersion as e:
            raise ValueError(f"{text!r}: {version!r} is not a PEP 440 version") from e
    return EngineRequest(name, version)


def cache_root() -> Path:
    """``$MASKCERT_ENGINE_CACHE``, else ``~/.cache/maskcert/engines`` (``$XDG_CACHE_HOME`` honoured)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "maskcert" / "engines"


def engine_dir(distribution: str, version: str) -> Path:
    """Where ``distribution==version`` is (or would be) installed in the cache."""
    return cache_root() / f"{canonicalize_name(distribution)}-{version}"


def cached_engine(distribution: str, version: str) -> Path | None:
    """The complete install directory of ``distribution==version``, or None when not cached."""
    d = engine_dir(distribution, version)
    return d if (d / MANIFEST).is_file() else None


def _pip(args: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, 124, "", f"pip did not finish within {timeout_s:g} s ({e})")


def _last_words(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in (proc.stderr + "\n" + proc.stdout).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("WARNING: Location")] or lines
    return " | ".join(ln.strip() for ln in lines[-3:])[:600] or f"pip exited with status {proc.returncode}"


def _installed_in(path: Path) -> dict[str, PathDistribution]:
    out: dict[str, PathDistribution] = {}
    for dist in distributions(path=[str(path)]):
        name = dist.metadata["Name"]
        if name and isinstance(dist, PathDistribution):
            out[canonicalize_name(name)] = dist
    return out


def _environment_version(name: str, exclude: Path) -> str | None:
    """The version of ``name`` the environment (``sys.path`` without the cache) provides."""
    ex = str(exclude.resolve())
    path = [p for p in sys.path if p and not str(Path(p).resolve()).startswith(ex)]
    for dist in distributions(path=path):
        n = dist.metadata["Name"]
        if n and canonicalize_name(n) == name:
            return str(dist.version)
    return None


def _missing(
    dists: Iterable[PathDistribution], present: dict[str, PathDistribution], root: Path, notes: list[str]
) -> list[str]:
    """Requirements of ``dists`` neither in the directory nor satisfied by the environment."""
    env = {k: str(v) for k, v in default_environment().items()}
    env["extra"] = ""
    wanted: dict[str, Requirement] = {}
    for dist in dists:
        for line in dist.requires or ():
            try:
                req = Requirement(line)
            except InvalidRequirement:
                notes.append(f"unparsable requirement {line!r} of {dist.metadata['Name']}")
                continue
            if req.marker is not None and not req.marker.evaluate(env):
                continue
            key = canonicalize_name(req.name)
            if key in present:
                continue
            have = _environment_version(key, root)
            if have is not None and req.specifier.contains(have, prereleases=True):
                continue
            if key in PROVIDED:
                notes.append(f"{req} not installed (provided by the environment: {have or 'absent'})")
                continue
            wanted.setdefault(key, req)
    return [str(Requirement(f"{r.name}{r.specifier}")) for r in wanted.values()]


def install_engine(distribution: str, version: str, *, timeout_s: float = 600.0) -> Path:
    """Install ``distribution==version`` (and the requirements the environment lacks) into the cache;
    the directory. A cached install is reused. Raises :class:`UnknownEngineVersion` or
    :class:`EngineInstallError`."""
    hit = cached_engine(distribution, version)
    if hit is not None:
        return hit
    final = engine_dir(distribution, version)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    notes: list[str] = []
    try:
        spec = f"{distribution}=={version}"
        proc = _pip(["install", "--no-deps", "--target", str(tmp), "-q", spec], timeout_s)
        if proc.returncode != 0:
            words = _last_words(proc)
            if "No matching distribution" in words or "Could not find a version" in words:
                raise UnknownEngineVersion(distribution, version, f"pip found no such release ({words})")
            raise EngineInstallError(distribution, version, words)
        done: set[str] = set()
        for _level in range(_MAX_LEVELS):
            present = _installed_in(tmp)
            fresh = [d for k, d in present.items() if k not in done]
            done.update(present)
            missing = _missing(fresh, present, tmp, notes)
            if not missing:
                break
            proc = _pip(["install", "--no-deps", "--target", str(tmp), "-q", *missing], timeout_s)
            if proc.returncode != 0:
                raise EngineInstallError(
                    distribution, version, f"its requirements {missing} failed: {_last_words(proc)}"
                )
        manifest = {
            "distribution": distribution,
            "version": version,
            "installed": sorted(f"{k}=={d.version}" for k, d in _installed_in(tmp).items()),
            "notes": notes,
            "python": sys.version.split()[0],
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        if final.exists():  # another process finished first, or a stale incomplete directory
            if (final / MANIFEST).is_file():
                shutil.rmtree(tmp, ignore_errors=True)
                return final
            if time.time() - final.stat().st_mtime > 60:  # stale; a younger one may get its manifest now
                shutil.rmtree(final, ignore_errors=True)
        try:
            os.replace(tmp, final)
        except OSError:  # another process renamed its directory there first (the race above)
            if (final / MANIFEST).is_file() or final.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
                return _await_manifest(final)
            raise
        (final / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _await_manifest(final: Path, timeout_s: float = 30.0) -> Path:
    """``final`` once the process that renamed it there has written its manifest."""
    deadline = time.monotonic() + timeout_s
    while not (final / MANIFEST).is_file():
        if time.monotonic() > deadline:
            raise EngineInstallError(
                final.name, "", f"{final} appeared without a manifest (an interrupted install?)"
            )
        time.sleep(0.2)
    return final


def _sort_versions(versions: Iterable[str]) -> list[str]:
    parsed = []
    for v in versions:
        try:
            parsed.append((Version(v), v))
        except InvalidVersion:
            continue
    return [v for _, v in sorted(parsed)]


def released_versions(distribution: str, *, refresh: bool = False, timeout_s: float = 120.0) -> list[str]:
    """The released versions of ``distribution`` on the package index, oldest first (cached a day).
    Raises :class:`EngineInstallError` when the index cannot be asked."""
    path = cache_root() / "versions" / f"{canonicalize_name(distribution)}.json"
    if not refresh and path.is_file() and time.time() - path.stat().st_mtime < _VERSIONS_TTL_S:
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, list) and all(isinstance(v, str) for v in data):
                return _sort_versions(data)
        except (OSError, json.JSONDecodeError):
            pass
    proc = _pip(["index", "versions", distribution], timeout_s)
    m = re.search(r"Available versions:\s*(.+)", proc.stdout)
    if proc.returncode != 0 or m is None:
        raise EngineInstallError(distribution, "*", f"pip index versions failed: {_last_words(proc)}")
    versions = _sort_versions(v.strip() for v in m.group(1).split(","))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(versions), encoding="utf-8")
    return versions
