"""Whose fault is an exception: an adapter calling an API the installed
engine release lacks is never a ``crash`` finding; outside the adapter's tested versions it is a usage
error (exit 2) naming the version and what is missing, inside them maskcert's internal error (exit 3)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from types import MappingProxyType

import pytest

import props.backends
import tokenizers_matrix as tm
from maskcert.certification import UnsupportedEngine, certify
from maskcert.cli import main
from props.backends import REGISTRY, BackendInfo
from props.backends.worker import WorkerBackend
from props.contract.attribution import AdapterFault, adapter_fault
from props.contract.findings import SpecKind, SpecRef
from props.corpus import Case
from refdecoder import Choice

from ._toys import CallsMissingEngineApi

CASE = Case(SpecRef(SpecKind.CHOICE, ["yes", "no"], "yes-no", "test"), valid=("yes",))


def _module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    return module


@pytest.fixture(scope="module")
def fake() -> types.ModuleType:
    """A fake engine and a fake adapter module calling it."""
    _module(
        "fake_engine",
        "def work(): raise RuntimeError('engine bug')\n"
        "def deep(): return {}.missing\n"
        "def takes_nothing(): return 1\n",
    )
    _module("lazy_engine", "def __getattr__(name):\n    raise AttributeError(f'no {name} here')\n")
    return _module(
        "fake_adapter",
        "import fake_engine, lazy_engine\n"
        "def lazy_missing(): return lazy_engine.new_api()\n"
        "def missing(): return fake_engine.new_api()\n"
        "def engine_error(): return fake_engine.work()\n"
        "def engine_attribute_error(): return fake_engine.deep()\n"
        "def wrong_keyword(): return fake_engine.takes_nothing(strict=True)\n"
        "def from_c(): return int('x')\n"
        "def missing_module():\n    import fake_engine.json_schema\n",
    )


def _raised(fn: object) -> BaseException:
    try:
        fn()  # type: ignore[operator]
    except Exception as e:  # noqa: BLE001 - the exception is the test's subject
        return e
    raise AssertionError("expected an exception")


def test_the_rule(fake: types.ModuleType) -> None:
    adapter = {"fake_adapter"}
    assert "fake_engine has no attribute 'new_api'" in str(adapter_fault(_raised(fake.missing), adapter))
    assert "does not accept" in str(adapter_fault(_raised(fake.wrong_keyword), adapter))
    assert "cannot import" in str(adapter_fault(_raised(fake.missing_module), adapter))
    # A module __getattr__ (lazy loading) raising for a name it lacks is the asking frame's lookup.
    assert "lazy_engine has no attribute 'new_api'" in str(adapter_fault(_raised(fake.lazy_missing), adapter))
    # The engine's own failures stay the engine's: raised in its frames, or by C code it runs.
    assert adapter_fault(_raised(fake.engine_error), adapter) is None
    assert adapter_fault(_raised(fake.engine_attribute_error), adapter) is None
    assert adapter_fault(_raised(fake.from_c), adapter) is None
    # Only the adapter's modules count as the adapter's.
    assert adapter_fault(_raised(fake.missing), {"some_other_adapter"}) is None


def test_an_adapter_fault_inside_the_tested_versions_is_an_internal_error() -> None:
    report = certify(
        CallsMissingEngineApi, tokenizers=[tm.byte_vocabulary()], corpus=[], cases=[CASE], examples=2
    )
    assert report.exit_code == 3
    assert not report.findings, "an adapter's fault is never the engine's finding"
    [error] = report.data["internal_errors"]
    assert "adapter fault" in error and "numpy has no attribute 'this_engine_api_does_not_exist'" in error


@pytest.fixture
def registered_toy(monkeypatch: pytest.MonkeyPatch) -> str:
    """The toy registered with a tested range its version is outside of."""
    name = CallsMissingEngineApi().name
    info = BackendInfo(name, "tests._toys:CallsMissingEngineApi", "numpy", "numpy", "==0.0.1")
    monkeypatch.setattr(props.backends, "REGISTRY", MappingProxyType({**REGISTRY, name: info}))
    return name


def test_outside_the_tested_versions_it_is_a_usage_error(registered_toy: str) -> None:
    with pytest.raises(UnsupportedEngine, match=r"outside the versions .* tested on \(numpy==0\.0\.1\)") as e:
        certify(CallsMissingEngineApi, tokenizers=[tm.byte_vocabulary()], corpus=[], cases=[CASE], examples=2)
    assert "this_engine_api_does_not_exist" in str(e.value)


def test_the_cli_exits_2_naming_the_version(
    registered_toy: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "certify",
            "--backend",
            "tests._toys:CallsMissingEngineApi",
            "--in-process",
            "--regex",
            "yes|no",
            "--tokenizer",
            "byte",
            "--examples",
            "2",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "outside the versions" in err and "this_engine_api_does_not_exist" in err


def test_the_worker_judges_faults_in_the_child() -> None:
    vocab = tm.byte_vocabulary()
    with WorkerBackend("tests._toys:CallsMissingEngineApi", timeout_s=30) as backend:
        compiled = backend.compile(Choice(("yes", "no")), vocab)
        matcher = backend.matcher(compiled)  # type: ignore[arg-type]
        with pytest.raises(AdapterFault, match="this_engine_api_does_not_exist") as e:
            matcher.mask()
        assert e.value.operation == "call" and e.value.backend == backend.name


def test_an_adapter_that_cannot_import_from_the_installed_release_names_the_versions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    info = BackendInfo(
        "old-engine", "tests._adapter_for_a_newer_release:Adapter", "numpy", "numpy", "==0.0.1"
    )
    monkeypatch.setattr(props.backends, "REGISTRY", MappingProxyType({**REGISTRY, info.name: info}))
    monkeypatch.setattr(props.backends, "ADAPTERS", MappingProxyType({info.name: info.adapter}))
    with pytest.raises(
        props.backends.BackendUnavailable, match=r"installed numpy \S+ lacks what the adapter"
    ):
        props.backends.adapter_class(info.name)


def test_an_engine_api_that_breaks_its_contract_is_the_engines_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """lm-format-enforcer's ``get_allowed_tokens`` returned None on two real schemas (129k vocabulary):
    the adapter's ``.allowed_tokens`` on it was once judged the adapter's AttributeError (an internal
    error); the adapter now says what the engine did, and it is the engine's crash."""
    pytest.importorskip("lmformatenforcer")
    from lmformatenforcer import TokenEnforcer

    from props.backends import load_backend
    from props.contract.attribution import adapter_modules
    from refdecoder import Regex

    backend = load_backend("lm-format-enforcer")
    compiled = backend.compile(Regex("ab"), tm.byte_vocabulary())
    m = backend.matcher(compiled)
    monkeypatch.setattr(TokenEnforcer, "get_allowed_tokens", lambda self, ids: None)
    with pytest.raises(RuntimeError, match="returned None") as info:
        m.mask()
    assert adapter_fault(info.value, adapter_modules(type(backend), type(m))) is None
