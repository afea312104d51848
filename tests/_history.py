"""A toy release series for the history, diff and site tests: three "releases" of xgrammar played by
the reference and toy backends (:mod:`tests._toys`), certified on two features, so every part of a
history shows — an exact cell, a regression (0.1.19 ignores ``uniqueItems``), a defect fixed in the
newest release and one that stays."""

from __future__ import annotations

from pathlib import Path

from maskcert.history import History, run_history

ENGINE = "xgrammar"
RELEASED = ["0.1.17", "0.1.18", "0.1.19", "0.2.9"]
#: who plays each release; 0.1.18 is never run when sampled (a release between run ones)
BACKENDS = {
    "0.1.17": "reference",
    "0.1.18": "reference",
    "0.1.19": "tests._toys:IgnoresUniqueItems",
    "0.2.9": "tests._toys:NoBackslash",
}
FEATURES = ["json_schema/uniqueItems", "json_schema/pattern"]


def toy_history(out: Path, *, sample: int | None = 3, **kw: object) -> History:
    """The toy series' history under ``out`` (0.1.17, 0.1.19 and 0.2.9 run; no bisection)."""
    return run_history(
        ENGINE,
        None,
        out=out,
        sample=sample,
        features=FEATURES,
        released=RELEASED,
        backend_of=BACKENDS.__getitem__,
        bisect_bounds=False,
        **kw,  # type: ignore[arg-type]
    )
