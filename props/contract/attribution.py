"""Whose fault is an exception: the engine's (a finding) or the adapter's (never a finding).

An adapter is maskcert's code. When it calls an API the installed engine release does not have
(``AttributeError: module 'xgrammar' has no attribute ...``, a keyword argument the release does not
take, a module it does not ship), the engine has no defect: maskcert cannot drive that release. Such
an exception becomes :class:`AdapterFault`, which the application reports as a usage error when the
engine version lies outside the adapter's tested range (exit 2, naming the version and what is
missing) and as maskcert's internal error otherwise (exit 3). Only exceptions from inside the
engine's own calls are ``crash`` findings.

The rule (:func:`adapter_fault`) looks at where the exception was raised — the innermost traceback
frame — and at its type:

================================================  ==========================================
raised in an adapter module's own frame           verdict
================================================  ==========================================
``AttributeError``                                 the adapter's: an attribute the engine
                                                   release (or the adapter) lacks
``ImportError``                                    the adapter's: a module the release lacks
``NameError``                                      the adapter's: a bug in it
``TypeError`` about the call's arguments           the adapter's: a signature the release
(unexpected keyword, missing positional,           does not have
pybind11's "incompatible function arguments")
anything else, or raised inside the engine         the engine's (a finding)
================================================  ==========================================

A C extension's exception has no frame of its own, so it is judged at the adapter's frame that
called it, and so is a lookup hook's (a module ``__getattr__`` raising for a name it does not have): an engine ``RuntimeError`` from C++ stays the engine's, a binding that rejects its
arguments is the adapter's.
"""

from __future__ import annotations

from collections.abc import Collection
from types import ModuleType
from typing import Any

from refdecoder.errors import MaskcertError

__all__ = ["AdapterFault", "adapter_fault", "adapter_modules", "raised_in", "ADAPTER_MODULES_PREFIX"]

#: Every registered adapter lives under this package (a ``module:Class`` adapter is named by its module).
ADAPTER_MODULES_PREFIX = "props.backends."

_SIGNATURE_WORDS = (
    "unexpected keyword argument",
    "required positional argument",
    "positional argument",
    "incompatible function arguments",
    "takes no arguments",
    "takes no keyword arguments",
)


class AdapterFault(MaskcertError, RuntimeError):
    """maskcert's adapter for ``backend`` failed in ``operation``, not the engine: ``detail`` says
    what is missing or wrong. ``version`` is the installed engine's version."""

    def __init__(self, backend: str, version: str, operation: str, detail: str) -> None:
        self.backend = backend
        self.version = version
        self.operation = operation
        self.detail = detail
        super().__init__(f"the {backend} adapter failed in {operation} on {backend} {version}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:  # crosses process boundaries (worker shards)
        return (type(self), (self.backend, self.version, self.operation, self.detail))


_LOOKUP_HOOKS = frozenset({"__getattr__", "__getattribute__"})


def raised_in(e: BaseException) -> str:
    """The module name of the innermost Python frame of ``e``'s traceback ("" without one), not
    counting attribute-lookup hooks (a module's ``__getattr__`` raising for a name it lacks is the
    lookup of the frame that asked for it)."""
    frames = []
    tb = e.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    while len(frames) > 1 and frames[-1].f_code.co_name in _LOOKUP_HOOKS:
        frames.pop()
    return str(frames[-1].f_globals.get("__name__", "")) if frames else ""


def _owner(obj: Any) -> str:
    if isinstance(obj, ModuleType):
        return obj.__name__
    if isinstance(obj, type):
        return f"{obj.__module__}.{obj.__qualname__}"
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


_NOT_ADAPTER = frozenset({"builtins", "typing", "abc"})


def adapter_modules(*classes: type) -> frozenset[str]:
    """The modules of an adapter's code: those of ``classes`` and their bases (not the standard
    library's ``object``/``Generic``/``Protocol``), plus the adapters' shared helpers."""
    mods = {c.__module__ for cls in classes for c in cls.__mro__}
    return frozenset((mods - _NOT_ADAPTER) | {ADAPTER_MODULES_PREFIX + "_common"})


def adapter_fault(e: BaseException, modules: Collection[str]) -> str | None:
    """What the adapter got wrong when ``e`` is its fault by the rule in the module doc, None when
    ``e`` is the engine's. ``modules`` are the adapter's (:func:`adapter_modules`)."""
    where = raised_in(e)
    if where not in modules:
        return None
    if isinstance(e, AttributeError):
        obj = getattr(e, "obj", None)
        name = getattr(e, "name", None)
        if obj is not None and name:
            return f"{_owner(obj)} has no attribute {name!r} ({where})"
        return f"AttributeError in {where}: {e}"
    if isinstance(e, ImportError):
        return f"cannot import {e.name or ''} ({where}): {e}"
    if isinstance(e, NameError):
        return f"NameError in {where}: {e}"
    if isinstance(e, TypeError) and any(w in str(e) for w in _SIGNATURE_WORDS):
        return f"a call the installed release does not accept ({where}): {str(e)[:300]}"
    return None
