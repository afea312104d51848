"""IDNA2008 in the reference (``refdecoder._idna``, ``_idna_rules``, ``_idna_tables``) against the
``idna`` package, an independent implementation with its own tables (Unicode 16+ where the
reference pins 14.0.0: comparisons keep to code points assigned in both).

* The vendored tables are RFC 5892's derivation over this Python's ``unicodedata`` (when it has the
  pinned version), and the derived categories equal ``idna``'s on every code point assigned at
  Unicode 14.0.0.
* The name automata (``"hostname"`` and ``"mail"``) agree with ``props.corpus.format_check``'s
  ``idn_name_ok`` (``idna``'s functions) on walks, mutations and the suite's strings.
* JSON-Schema-Test-Suite ``optional/format`` for drafts 7, 2019-09 and 2020-12: ``idn-email`` compiles
  with zero disagreements; ``idn-hostname`` is refused with its reason, and its strings agree with
  the name automaton but for the refused properties (lengths, Punycode), each a predicate.
"""

from __future__ import annotations

import json
import random
import unicodedata
from typing import Any

import pytest

import refdecoder
from props.corpus.format_check import idn_name_ok
from refdecoder import JsonProfile, JsonSchema, Limits, Unsupported
from refdecoder import _idna_tables as tables
from refdecoder._cpset import contains
from refdecoder._idna import idn_name_dfa
from refdecoder._idna_rules import CONTEXTJ, CONTEXTO, PVALID, UNICODE_VERSION, derive

from ._data import compile_or_status, require_shared, serializations
from .test_formats import mutate, sample

#: Characters the rules single out: dots, hyphen, l, contextual ones, a virama, Joining_Type D/R/T,
#: Greek, Hebrew, Hiragana, Han, Arabic letters and both digit sets, marks, a capital, a DISALLOWED.
NOISE = (
    ".。．｡-lLxXn0aA\u00b7\u0375\u05f3\u05f4\u30fb\u200c\u200d\u094d\u0915\u0628\u064a\u0627\u064b"
    "\u03b1\u05d0\u3041\u4e08\u0660\u06f0\u0301\u0903\u0488\u302e\u00e9\u00c9ß "
)
#: More of the same kinds: Hebrew, Arabic D/R/T characters and marks, Devanagari, digits of both sets,
#: the PVALID and DISALLOWED exceptions, a conjoining jamo, a mark of an ignorable block.
MORE = (
    "\u05d1\u0646\u06cc\u0644\u0628\u0652\u0651\u064e\u0937\u0661\u06f1\u30a1\u3042\u03c2\u06fd"
    "\u0f0b\u3007\u0640\u07fa\u3031\u303b\u0345\u1100\u20d0"
)
ASSIGNED_AT_PIN = unicodedata.unidata_version == UNICODE_VERSION


def _assigned(cp: int) -> bool:
    return unicodedata.category(chr(cp)) != "Cn"


@pytest.mark.skipif(not ASSIGNED_AT_PIN, reason=f"unicodedata is not Unicode {UNICODE_VERSION}")
def test_tables_are_the_rfc5892_derivation() -> None:
    """Re-derive PVALID / CONTEXTJ / CONTEXTO (RFC 5892 §3) and compare with the vendored tables."""
    import regex

    di = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    assigned = [cp for cp in range(0x110000) if _assigned(cp)]
    default_ignorable = {cp for cp in assigned if di.match(chr(cp))}

    def nfkc(s: str) -> str:
        return unicodedata.normalize("NFKC", s)

    want: dict[str, set[int]] = {PVALID: set(), CONTEXTJ: set(), CONTEXTO: set()}
    for cp in assigned:
        got = derive(cp, unicodedata.category, nfkc, default_ignorable)
        if got in want:
            want[got].add(cp)
    for name, cps in want.items():
        table = getattr(tables, name)
        assert {cp for lo, hi in table for cp in range(lo, hi + 1)} == cps, name


@pytest.mark.skipif(not ASSIGNED_AT_PIN, reason=f"unicodedata is not Unicode {UNICODE_VERSION}")
def test_categories_equal_the_idna_package_on_code_points_assigned_in_both() -> None:
    from idna import idnadata
    from idna.intranges import intranges_contain

    differ = []
    for cp in range(0x110000):
        if not _assigned(cp):
            continue
        for name in (PVALID, CONTEXTJ, CONTEXTO):
            ours = contains(getattr(tables, name), cp)
            if ours != intranges_contain(cp, idnadata.codepoint_classes[name]):
                differ.append((hex(cp), name, ours))
    assert not differ, differ[:20]


def test_pinned_version_is_stated() -> None:
    assert tables.UNICODE_VERSION == UNICODE_VERSION == "14.0.0"


def _suite_strings(fmt: str) -> list[str]:
    root = require_shared("json-schema-test-suite/tests/draft2020-12/optional/format")
    groups = json.loads((root / f"{fmt}.json").read_text())
    return [t["data"] for g in groups for t in g["tests"] if isinstance(t["data"], str)]


@pytest.mark.skipif(not ASSIGNED_AT_PIN, reason=f"unicodedata is not Unicode {UNICODE_VERSION}")
@pytest.mark.parametrize("mode", ["hostname", "mail"])
def test_name_automaton_agrees_with_idna_package(mode: str) -> None:
    d = idn_name_dfa("hostname" if mode == "hostname" else "mail")
    rng = random.Random(mode)
    cands = [sample(d, rng, soft_len=12) for _ in range(150)] + d.examples(20)
    cands += [s.split("@")[-1] for s in _suite_strings("idn-hostname") + _suite_strings("idn-email")]
    cands += ["l·l", "α͵β", "א׳ב", "・ぁ", "ب٠ب", "क्\u200dष", "بي\u200cبي", "a.א", "0a.א", "xn--ab", "ab--c"]
    cands += [m for c in list(cands) for m in mutate(c, rng, NOISE, n=8)]
    seen = 0
    for s in cands:
        if not all(_assigned(ord(c)) or ord(c) in (0xFFFE, 0xFFFF) for c in s):
            continue
        seen += 1
        assert d.accepts(s) == idn_name_ok(s, mode), (mode, s, d.accepts(s))
    assert seen > 500


@pytest.mark.skipif(not ASSIGNED_AT_PIN, reason=f"unicodedata is not Unicode {UNICODE_VERSION}")
@pytest.mark.parametrize("mode", ["hostname", "mail"])
def test_name_automaton_agrees_with_idna_package_on_short_strings(mode: str) -> None:
    """Random strings of 1-8 characters the rules single out (every pair of them is near: the
    contextual rules look one character away, the label-wide ones across the label)."""
    d = idn_name_dfa("hostname" if mode == "hostname" else "mail")
    rng = random.Random(f"short-{mode}")
    alphabet = NOISE + MORE
    accepted = 0
    for _ in range(20_000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        got = d.accepts(s)
        accepted += got
        assert got == idn_name_ok(s, mode), (mode, s, got)
    assert accepted > 1000


# -- JSON-Schema-Test-Suite optional/format, drafts 7, 2019-09, 2020-12 ---------------------------------
DRAFTS = {"draft7": "draft-07", "draft2019-09": "2019-09", "draft2020-12": "2020-12"}


def refused_property(data: str) -> str | None:
    """The idn-hostname properties the reference does not decide (``_formats.UNSUPPORTED``): why a
    suite string's verdict is not the name automaton's, or None."""
    labels = data.replace("。", ".").replace("．", ".").replace("｡", ".").split(".")
    if any(label[:4].lower() == "xn--" for label in labels):
        return "an xn-- label must decode to a U-label (Punycode)"
    # RFC 5891 §4.2.4: octets of the A-label, by Python's own "punycode" codec (RFC 3492)
    a_labels = [label if label.isascii() else "xn--" + label.encode("punycode").decode() for label in labels]
    if any(len(label) > 63 for label in a_labels) or len(".".join(a_labels)) > 253:
        return "a label of more than 63 octets or a name of more than 253, in the A-label form"
    return None


def test_a_label_length_is_not_monotone_under_extension() -> None:
    """Why the 63-octet limit is refused rather than decided (``_formats.UNSUPPORTED``): appending a
    code point can shorten a U-label's A-label (Punycode's bias adapts to the deltas, RFC 3492 §6.1),
    so a prefix whose A-label is already too long may still have a completion that fits. Both labels
    are valid U-labels to the independent checker; the A-labels are Python's own ``punycode`` codec."""
    label = "\u03bc\u00fa\u0247\u03be\u01ab\u00df\u018c\u0188g\u018d\u01ba\u4e30\u0229\u0177\u00fdym"
    longer = label + "\u00fb"

    def a_label(u: str) -> str:
        return "xn--" + u.encode("punycode").decode()

    assert idn_name_ok(label, "hostname") and idn_name_ok(longer, "hostname")
    assert a_label(label) == "xn--gym-4ka8kua76f3d9am93algn9c1ln0q8a65650a"
    assert a_label(longer) == "xn--gym-4ka8kkl98glepbn96augu3dwm02rbb5996z"
    assert len(a_label(longer)) < len(a_label(label))


@pytest.mark.parametrize("folder", list(DRAFTS))
def test_suite_idn_email_compiles_without_disagreements(folder: str) -> None:
    root = require_shared(f"json-schema-test-suite/tests/{folder}/optional/format")
    profile = JsonProfile(formats="assert", allow_duplicate_keys=True, draft=DRAFTS[folder])
    groups = json.loads((root / "idn-email.json").read_text())
    disagreements = []
    for i, group in enumerate(groups):
        g, status = compile_or_status(JsonSchema(group["schema"], profile), Limits())
        assert g is not None, (folder, i, status)
        for case in group["tests"]:
            for text in serializations(case["data"], reorder=False, escapes=True):
                if g.accepts(text.encode("utf-8")) != case["valid"]:
                    disagreements.append((folder, i, case["description"], text))
    assert not disagreements, disagreements[:20]


@pytest.mark.parametrize("folder", list(DRAFTS))
def test_suite_idn_hostname_is_refused_and_otherwise_agrees(folder: str) -> None:
    root = require_shared(f"json-schema-test-suite/tests/{folder}/optional/format")
    profile = JsonProfile(formats="assert", allow_duplicate_keys=True, draft=DRAFTS[folder])
    groups: list[dict[str, Any]] = json.loads((root / "idn-hostname.json").read_text())
    d = idn_name_dfa("hostname")
    checked = 0
    for group in groups:
        with pytest.raises(Unsupported, match="Punycode"):
            refdecoder.compile(JsonSchema(group["schema"], profile))
        for case in group["tests"]:
            data = case["data"]
            if not isinstance(data, str):
                continue
            if d.accepts(data) != case["valid"]:
                assert not case["valid"] and refused_property(data) is not None, (folder, case)
            else:
                checked += 1
    assert checked > 50
