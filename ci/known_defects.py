"""The known-defects benchmark (issue 34): each defect of ``ci/known_defects.json`` certified on its
engine (small tokenizer, its triggering spec only) with the number instances off (``before``) and on
(``after``); a defect counts as found only when a finding matches its predicate, i.e. shows that
defect's own behaviour, not another defect on the same spec.

    HYPOTHESIS_PROFILE=ci python3 ci/known_defects.py [--tokenizer bpe] [--only ID] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from maskcert.certification import certify_case, load_vocabularies, resolve_backend
from props.checks.invariants import make_spec, mask_bits
from props.contract.findings import Finding, SpecKind, SpecRef
from props.corpus import Case

HERE = Path(__file__).resolve().parent


def matches(f: Finding, predicate: dict[str, str]) -> bool:
    """Whether ``f`` shows the behaviour ``predicate`` describes (see the data file's ``about``)."""
    if not str(f.invariant).startswith(predicate.get("invariant", "")):
        return False
    token = (f.token_bytes or b"").decode("latin-1")
    prefix = f.prefix_bytes.decode("latin-1")
    checks = (("token", token), ("prefix", prefix), ("text", prefix + token))
    return all(re.search(predicate[k], v) is not None for k, v in checks if k in predicate)


def run(defect: dict[str, Any], tokenizer: str, mode: str) -> tuple[bool, int]:
    """(found, findings) for one defect with the number instances ``mode`` ("on" | "off")."""
    os.environ["MASKCERT_NUMBER_TARGETS"] = mode
    backend = resolve_backend(defect["engine"], isolate=False)
    vocab = load_vocabularies([tokenizer])[0]
    case = Case(SpecRef(SpecKind.JSON_SCHEMA, defect["spec"], defect["id"], "known-defects"))
    result = certify_case(backend, case, vocab, seed=0, examples=4, strings=3)
    return any(matches(f, defect["predicate"]) for f in result.findings), len(result.findings)


def hand(defect: dict[str, Any]) -> list[str]:
    """Replay the defect's hand reproduction: each text fed byte by byte to the engine's adapter over the
    byte vocabulary; where the engine masked a byte, or whether it lets the text end."""
    backend = resolve_backend(defect["engine"], isolate=False)
    vocab = load_vocabularies(["byte"])[0]
    spec = SpecRef(SpecKind.JSON_SCHEMA, defect["spec"], defect["id"], "known-defects")
    out = []
    for text, _claimed in defect["hand"]:
        compiled = backend.compile(make_spec(spec, backend.profile.json), vocab)
        m = backend.matcher(compiled)
        data = text.encode()
        ids = vocab.index.fewest_tokens(data) or []
        said = ""
        for k, i in enumerate(ids):
            if not mask_bits(m.mask(), len(vocab))[i]:
                said = f"masked {data[k : k + 1]!r} after {data[:k]!r}"
                break
            m.accept(int(i))
        if not said:
            bits = mask_bits(m.mask(), len(vocab))
            said = "accepted, can end" if any(bits[e] for e in vocab.eos_ids) else "accepted, cannot end"
        out.append(f"{text}: {said}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizer", default="bpe")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--hand", action="store_true", help="replay the hand reproductions only")
    args = ap.parse_args(argv)
    defects = json.loads((HERE / "known_defects.json").read_text())["defects"]
    if args.hand:
        for d in defects:
            if not args.only or d["id"] in args.only:
                print(d["id"], *hand(d), sep="\n  ")
        return 0
    rows = []
    totals: dict[str, Counter[str]] = {}
    for d in defects:
        if args.only and d["id"] not in args.only:
            continue
        before, nb = run(d, args.tokenizer, "off")
        after, na = run(d, args.tokenizer, "on")
        rows.append(
            {"id": d["id"], "engine": d["engine"], "before": before, "after": after, "findings": [nb, na]}
        )
        c = totals.setdefault(d["engine"], Counter())
        c["defects"] += 1
        c["before"] += before
        c["after"] += after
        print(
            f"{d['id']:48} {d['engine']:20} before={'found' if before else '-':5} after={'found' if after else '-'}",
            flush=True,
        )
    print()
    for engine, c in sorted(totals.items()):
        print(f"{engine:20} before {c['before']}/{c['defects']}  after {c['after']}/{c['defects']}")
    if args.json:
        args.json.write_text(json.dumps({"tokenizer": args.tokenizer, "defects": rows}, indent=2) + "\n")
    os.environ.pop("MASKCERT_NUMBER_TARGETS", None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
