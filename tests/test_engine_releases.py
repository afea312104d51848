"""Engine releases side by side: version ranges, ``--backend NAME==VERSION`` through the
engine cache, feature detection in the adapters, and ``maskcert bisect``.

Nothing here installs from the network: pip is replaced where an install is exercised, releases in
the real cache are used only when already there (the ``slow`` test at the end)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import textwrap
from pathlib import Path

import pytest

import tokenizers_matrix as tm
from maskcert.bisect import ABSENT, PRESENT, BisectError, bisect, resolve_repro, run_repro, versions_between
from maskcert.cli import main
from props.backends import (
    REGISTRY,
    BackendInfo,
    BackendUnavailable,
    UnsupportedVersion,
    check_version,
    engine_request,
    engines,
)
from props.backends.worker import WorkerBackend
from props.contract.backend import Accepted, Compiled
from refdecoder import Choice


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "engine-cache"
    monkeypatch.setenv(engines.CACHE_ENV, str(root))
    return root


# -- requests and ranges ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "name", "version"),
    [
        ("xgrammar", "xgrammar", None),
        ("xgrammar==0.1.19", "xgrammar", "0.1.19"),
        (" llguidance == 1.2.0 ", "llguidance", "1.2.0"),
        ("lm-format-enforcer==0.10.12", "lm-format-enforcer", "0.10.12"),
        ("tests._toys:Broken", "tests._toys:Broken", None),
    ],
)
def test_parse_request(text: str, name: str, version: str | None) -> None:
    req = engines.parse_request(text)
    assert (req.name, req.version) == (name, version)


@pytest.mark.parametrize("text", ["xgrammar>=0.1", "xgrammar==not-a-version", "mod:Cls==1.0", "=="])
def test_parse_request_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="expected|version|takes no version"):
        engines.parse_request(text)


def test_every_engine_declares_a_range_and_certified_releases() -> None:
    for name in ("xgrammar", "llguidance", "outlines-core", "lm-format-enforcer"):
        info = REGISTRY[name]
        assert info.oldest is not None, name
        assert len(info.releases) >= 2, name  # the oldest and the newest at least
        assert info.releases[0] == info.oldest, name


def test_a_certified_release_outside_the_range_is_refused() -> None:
    with pytest.raises(ValueError, match="outside tested"):
        BackendInfo("toy", "m:C", "m", "m", ">=1.0,<=2.0", {}, ("0.9",))


def test_below_the_range_is_a_usage_error_naming_it() -> None:
    with pytest.raises(UnsupportedVersion, match=r"below .*xgrammar>=0\.1\.17") as e:
        check_version("xgrammar", "0.1.10")
    assert isinstance(e.value, BackendUnavailable)
    check_version("xgrammar", REGISTRY["xgrammar"].oldest)  # the oldest passes
    check_version("xgrammar", "99.0")  # above: tried, and attribution decides (test_attribution.py)
    check_version("not-registered", "0.0.1")


def test_engine_request(cache: Path) -> None:
    assert engine_request("xgrammar") == ("xgrammar", None)
    with pytest.raises(UnsupportedVersion):
        engine_request("llguidance==0.6.0")
    with pytest.raises(BackendUnavailable, match="registered engine only"):
        engine_request("reference==0.1")
    with pytest.raises(BackendUnavailable, match="not in the engine cache"):
        engine_request("xgrammar==0.1.19", install=False)


def test_cli_certify_below_the_range_exits_2(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certify", "--backend", "xgrammar==0.1.10", "--tokenizer", "byte"]) == 2
    assert "xgrammar>=0.1.17" in capsys.readouterr().err


# -- the cache --------------------------------------------------------------------------------------
def _fake_release(root: Path, module: str, version: str, body: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{module}.py").write_text(body, encoding="utf-8")
    info = root / f"{module}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {module}\nVersion: {version}\n", encoding="utf-8"
    )


def test_cache_root_and_cached_engine(cache: Path) -> None:
    assert engines.cache_root() == cache
    assert engines.engine_dir("LM_Format.Enforcer", "0.9.6") == cache / "lm-format-enforcer-0.9.6"
    assert engines.cached_engine("xgrammar", "0.1.19") is None
    d = engines.engine_dir("xgrammar", "0.1.19")
    d.mkdir(parents=True)
    assert engines.cached_engine("xgrammar", "0.1.19") is None  # no manifest: an interrupted install
    (d / engines.MANIFEST).write_text("{}", encoding="utf-8")
    assert engines.cached_engine("xgrammar", "0.1.19") == d
    assert engines.install_engine("xgrammar", "0.1.19") == d  # a hit runs no pip


def test_install_errors_are_typed(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def pip(stderr: str) -> object:
        return lambda args, timeout_s: subprocess.CompletedProcess(args, 1, "", stderr)

    monkeypatch.setattr(engines, "_pip", pip("ERROR: No matching distribution found for xgrammar==0.0.0"))
    with pytest.raises(engines.UnknownEngineVersion, match=r"xgrammar==0\.0\.0.*no such release"):
        engines.install_engine("xgrammar", "0.0.0")
    monkeypatch.setattr(engines, "_pip", pip("ERROR: Could not install: Network is unreachable"))
    with pytest.raises(engines.EngineInstallError, match="Network is unreachable") as e:
        engines.install_engine("xgrammar", "0.1.19")
    assert not isinstance(e.value, engines.UnknownEngineVersion)
    assert engines.cached_engine("xgrammar", "0.1.19") is None
    assert not any(cache.iterdir())  # the temporary directory is gone


def test_install_brings_the_requirements_the_environment_lacks(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release goes in alone, then what it requires and the environment does not satisfy."""
    calls: list[list[str]] = []

    def pip(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        calls.append(list(args))
        target = Path(args[args.index("--target") + 1])
        for spec in args[args.index("-q") + 1 :]:
            name = spec.split("=")[0].split(">")[0].split("<")[0]
            info = target / f"{name}-1.0.dist-info"
            info.mkdir()
            requires = (
                "Requires-Dist: numpy\nRequires-Dist: maskcert-surely-absent>=1\n"
                "Requires-Dist: torch>=1\nRequires-Dist: pytest; extra == 'test'\n"
                if name == "fakeengine"
                else ""
            )
            (info / "METADATA").write_text(
                f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n{requires}", encoding="utf-8"
            )
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(engines, "_pip", pip)
    d = engines.install_engine("fakeengine", "1.0")
    assert calls[1][-1] == "maskcert-surely-absent>=1"  # numpy is there, torch is provided, pytest an extra
    manifest = json.loads((d / engines.MANIFEST).read_text(encoding="utf-8"))
    assert manifest["installed"] == ["fakeengine==1.0", "maskcert-surely-absent==1.0"]


def test_the_worker_runs_the_cached_release(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``engine_path`` goes first on the worker's sys.path: its release shadows the environment's."""
    adapters = tmp_path / "adapters"
    adapters.mkdir()
    (adapters / "versioned_toy.py").write_text(
        textwrap.dedent(
            """
            from importlib.metadata import version
            import maskcert_fake_engine
            from props.backends.reference import ReferenceBackend

            class VersionedToy(ReferenceBackend):
                name = "versioned-toy"
                version = version("maskcert_fake_engine")
                flavour = maskcert_fake_engine.FLAVOUR
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(adapters))
    _fake_release(tmp_path / "old", "maskcert_fake_engine", "0.1.0", "FLAVOUR = 'old'\n")
    with WorkerBackend("versioned_toy:VersionedToy", engine_path=tmp_path / "old") as backend:
        assert backend.version == "0.1.0"
        vocab = tm.byte_vocabulary()
        compiled = backend.compile(Choice(("ab",)), vocab)
        assert isinstance(compiled, Compiled)
        assert isinstance(backend.matcher(compiled).accept(ord("a")), Accepted)


# -- feature detection ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("module", "features"),
    [
        ("xgrammar", {"bounded_rollback": False, "is_completed": True, "fork": True, "torch_bitmask": False}),
        ("llguidance", {"validate_with_warnings": True, "limits": True, "choice": True}),
        ("outlines_core", {"rollback": True, "write_mask_into": True, "max_recursion_depth": True}),
        ("lmfe", {"config_whitespace": True, "eos_list": True, "bitmask": True}),
    ],
)
def test_features_of_the_installed_release(module: str, features: dict[str, bool]) -> None:
    """On the newest release (the one the environment pins) every detected feature is there."""
    engine = {"xgrammar": "xgrammar", "llguidance": "llguidance", "outlines_core": "outlines_core"}
    if importlib.util.find_spec(engine.get(module, "lmformatenforcer")) is None:
        pytest.skip(f"the engine of props.backends.{module} is not installed")
    mod = importlib.import_module(f"props.backends.{module}")
    for key, value in features.items():
        assert mod.FEATURES[key] is value, key


# -- bisect -----------------------------------------------------------------------------------------
def test_versions_between() -> None:
    released = ["0.1.0", "0.1.17", "0.1.19", "0.1.20rc1", "0.2.0", "0.2.9", "0.3.0"]
    assert versions_between(released, ">=0.1.17,<=0.2.9", None) == ["0.1.17", "0.1.19", "0.2.0", "0.2.9"]
    assert versions_between(released, ">=0.1.17,<=0.2.9", "0.1.19..") == ["0.1.19", "0.2.0", "0.2.9"]
    assert versions_between(released, ">=0.1.17,<=0.2.9", "..0.1.19") == ["0.1.17", "0.1.19"]
    with pytest.raises(BisectError, match="A..B"):
        versions_between(released, ">=0.1", "0.1.19")


REPRO = """
import sys
import fakeeng
if fakeeng.BUG:
    print("REPRODUCED: the bug")
    sys.exit(1)
print("NOT REPRODUCED: fine")
"""


def _releases(tmp_path: Path, bug: dict[str, bool | None]) -> dict[str, Path]:
    out = {}
    for v, has in bug.items():
        body = "raise ImportError('broken release')\n" if has is None else f"BUG = {has}\n"
        _fake_release(tmp_path / f"fakeeng-{v}", "fakeeng", v, body)
        out[v] = tmp_path / f"fakeeng-{v}"
    return out


@pytest.mark.parametrize("exhaustive", [False, True])
def test_bisect_finds_the_fixing_release(tmp_path: Path, exhaustive: bool) -> None:
    versions = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6"]
    bug: dict[str, bool | None] = {v: v < "1.4" for v in versions}
    bug["1.2"] = None  # an inconclusive release is stepped over
    dirs = _releases(tmp_path, bug)
    script = tmp_path / "repro.py"
    script.write_text(REPRO, encoding="utf-8")
    result = bisect("fakeeng", script, versions, prepare=dirs.__getitem__, exhaustive=exhaustive)
    assert result.first_showing == "1.0"
    assert result.first_fixing == "1.4"
    assert result.runs["1.3"].verdict == PRESENT and result.runs["1.4"].verdict == ABSENT
    if not exhaustive:
        assert len(result.runs) < len(versions)
    assert "first release fixing it: 1.4" in result.summary()


def test_bisect_finds_the_introducing_release(tmp_path: Path) -> None:
    versions = [f"2.{i}" for i in range(9)]
    bug: dict[str, bool | None] = {v: v >= "2.5" for v in versions}
    dirs = _releases(tmp_path, bug)
    script = tmp_path / "repro.py"
    script.write_text(REPRO, encoding="utf-8")
    result = bisect("fakeeng", script, versions, prepare=dirs.__getitem__)
    assert result.first_showing == "2.5"
    assert result.first_fixing is None
    assert "none yet (still present in 2.8)" in result.summary()
    assert run_repro(script, None)[0] != PRESENT  # without a release on the path: inconclusive


def test_resolve_repro(tmp_path: Path) -> None:
    (tmp_path / "repro").mkdir()
    script = tmp_path / "repro" / "abc.py"
    script.write_text("", encoding="utf-8")
    report = {"defects": [{"id": "D1", "repro": "repro/abc.py"}], "findings": []}
    (tmp_path / "report.json").write_text(json.dumps(report), encoding="utf-8")
    assert resolve_repro(f"{tmp_path}:D1") == tmp_path / "repro" / "abc.py"
    assert resolve_repro(f"{tmp_path / 'report.json'}:D1") == tmp_path / "repro" / "abc.py"
    assert resolve_repro(str(script)) == script
    with pytest.raises(BisectError, match="no defect or finding 'D2'"):
        resolve_repro(f"{tmp_path}:D2")
    with pytest.raises(BisectError, match="expected a reproducer script"):
        resolve_repro("nothing-here")


def test_cli_bisect_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bisect", "nothing-here", "--backend", "xgrammar"]) == 2
    assert "expected a reproducer script" in capsys.readouterr().err
    assert main(["bisect", "x.py", "--backend", "reference"]) == 2


# -- old releases, when already in the cache --------------------------------------------------------
OLD = [
    (name, v)
    for name in ("xgrammar", "llguidance", "outlines-core", "lm-format-enforcer")
    for v in REGISTRY[name].releases
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "version"), OLD, ids=[f"{n}=={v}" for n, v in OLD])
def test_a_certified_release_drives_every_operation(name: str, version: str) -> None:
    """Every certified release, from the cache (never installed here): compile, mask, accept, fork,
    rollback and EOS through the worker, without an adapter fault."""
    path = engines.cached_engine(REGISTRY[name].distribution, version)
    if path is None:
        pytest.skip(
            f"{name}=={version} is not in the engine cache ({engines.cache_root()}); ci/versions.sh fills it"
        )
    vocab = tm.resolve("bpe")
    with WorkerBackend(name, engine_path=path) as backend:
        assert backend.version == version
        compiled = backend.compile(Choice(("yes", "no")), vocab)
        assert isinstance(compiled, Compiled)
        m = backend.matcher(compiled)
        ids = list(vocab.encode("yes"))
        assert m.mask().any()
        for t in ids:
            assert isinstance(m.accept(t), Accepted)
        fork = m.fork()
        m.rollback(len(ids))
        assert m.mask().any()
        assert fork.is_accepting()


# -- the fallbacks for older releases agree with the newer API, on the installed release -------------
def _walk(backend: object, spec: object, text: str) -> list[tuple[bytes, bool]]:
    """Masks and is_accepting along ``text``, then after a fork and a rollback of everything."""
    vocab = tm.resolve("bpe")
    compiled = backend.compile(spec, vocab)  # type: ignore[attr-defined]
    assert isinstance(compiled, Compiled), compiled
    m = backend.matcher(compiled)  # type: ignore[attr-defined]
    seen = [(m.mask().tobytes(), m.is_accepting())]
    ids = list(vocab.encode(text))
    for t in ids:
        assert isinstance(m.accept(t), Accepted)
        seen.append((m.mask().tobytes(), m.is_accepting()))
    fork = m.fork()
    seen.append((fork.mask().tobytes(), fork.is_accepting()))
    m.rollback(len(ids))
    seen.append((m.mask().tobytes(), m.is_accepting()))
    return seen


FALLBACKS = [
    (
        "xgrammar",
        "xgrammar",
        "XGrammarBackend",
        {"is_completed": False, "fork": False, "torch_bitmask": True},
    ),
    ("llguidance", "llguidance", "LLGuidanceBackend", {"validate_with_warnings": False, "choice": False}),
    (
        "llguidance",
        "llguidance",
        "LLGuidanceBackend",
        {"validate_with_warnings": False, "validate_grammar": False},
    ),
    ("outlines_core", "outlines_core", "OutlinesCoreBackend", {"rollback": False, "write_mask_into": False}),
    ("lmformatenforcer", "lmfe", "LMFormatEnforcerBackend", {"eos_list": False}),
]


@pytest.mark.parametrize(
    ("engine", "module", "cls", "off"), FALLBACKS, ids=[f"{m}-{'-'.join(o)}" for _e, m, _c, o in FALLBACKS]
)
def test_fallbacks_agree_with_the_newer_api(
    engine: str, module: str, cls: str, off: dict[str, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each path an older release takes, forced on the installed (newer) release, gives the same masks
    and verdicts as the path the newer release takes."""
    if importlib.util.find_spec(engine) is None:
        pytest.skip(f"{engine} is not installed")
    mod = importlib.import_module(f"props.backends.{module}")
    spec = Choice(("yes", "yesterday", "no"))
    modern = _walk(getattr(mod, cls)(), spec, "yes")
    for key, value in off.items():
        monkeypatch.setitem(mod.FEATURES, key, value)
    assert _walk(getattr(mod, cls)(), spec, "yes") == modern


def test_an_option_the_release_lacks_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec("xgrammar") is None:
        pytest.skip("xgrammar is not installed")
    from props.backends import xgrammar
    from props.backends._common import UnsupportedOption

    monkeypatch.setitem(xgrammar.FEATURES, "max_whitespace_cnt", False)
    with pytest.raises(UnsupportedOption, match="max_whitespace_cnt"):
        xgrammar.XGrammarBackend(max_whitespace_cnt=2)
