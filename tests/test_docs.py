"""The project's docs resolve: every ``docs/<name>.md §N`` or ``§N.M`` citation in the code names a
numbered heading of that file (and item M of that section's numbered list), no citation of the old
out-of-tree design and style documents is left, and ``docs/invariants.md`` has one entry per invariant.

A citation is ``docs/<name>.md`` followed by ``§N``, ``§N.M`` or a range (``§4.6–4.9``: every item
between; ``§1–3``: every section between), optionally continued by ``, §K`` (``docs/style.md §7, §14``).
A numbered heading is ``## N. Title`` or ``## §N Title`` (any level); items are lines ``M. ...`` at
column 0 between it and the next heading of the same or a higher level. Fenced code is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

from props.contract.findings import INVARIANTS, SEVERITY

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
THIS = Path(__file__).resolve()
# Where citations are looked for (tests/ too; this file is skipped, its examples fail on purpose).
SCANNED = ("refdecoder", "tokenizers_matrix", "props", "serving_sim", "maskcert", "ci", "tests")

_REF = r"§\d+(?:\.\d+)?(?:[–-]\d+(?:\.\d+)?)?"
CITATION = re.compile(rf"docs/(?P<doc>[\w-]+)\.md\s+(?P<refs>{_REF}(?:,\s*{_REF})*)")
CITATION_START = re.compile(r"docs/[\w-]+\.md\s+§")
# The old citations, spelled so that a rewrite of the literal old forms leaves this pattern alone.
OLD_CITATION = re.compile(r"\b(?:DESIGN|STYLE)\s+§\s*\d+(?:\.\d+)?")
ANY_HEADING = re.compile(r"^(?P<level>#{1,6})\s")
NUMBERED_HEADING = re.compile(r"^#{1,6}\s+(?:§\s*)?(?P<num>\d+)(?:\.(?!\d)|\s|$)")
ITEM = re.compile(r"^(?P<num>\d+)\.\s")
FENCE = re.compile(r"^\s*(?:```|~~~)")

Ref: TypeAlias = "tuple[int, int | None]"  # (section, item or None)


@dataclass
class Outline:
    """A document's numbered sections, each with the numbers of its top-level numbered list items;
    ``duplicates`` lists section numbers that head more than one section."""

    items: dict[int, set[int]] = field(default_factory=dict)
    duplicates: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Citation:
    where: str  # "path:line"
    text: str  # as written
    doc: str  # "design" for docs/design.md
    refs: tuple[Ref, ...]


def outline(markdown: str) -> Outline:
    out = Outline()
    section: int | None = None
    level = 0
    fenced = False
    for line in markdown.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = ANY_HEADING.match(line)
        if heading:
            numbered = NUMBERED_HEADING.match(line)
            depth = len(heading.group("level"))
            if numbered:
                section, level = int(numbered.group("num")), depth
                if section in out.items:
                    out.duplicates.append(section)
                out.items.setdefault(section, set())
            elif section is not None and depth <= level:
                section = None
            continue
        item = ITEM.match(line)
        if item and section is not None:
            out.items[section].add(int(item.group("num")))
    return out


def _point(text: str) -> Ref:
    sec, _, item = text.partition(".")
    return int(sec), (int(item) if item else None)


def expand(ref: str) -> list[Ref]:
    """``§4`` -> [(4, None)]; ``§4.11`` -> [(4, 11)]; ``§4.6–4.8`` -> items 6, 7, 8 of section 4;
    ``§4.6–8`` likewise; ``§1–3`` -> sections 1, 2, 3; any other range -> its two ends."""
    first, *rest = re.split(r"[–-]", ref.removeprefix("§"))
    lo_sec, lo_item = _point(first)
    if not rest:
        return [(lo_sec, lo_item)]
    hi_sec, hi_item = _point(rest[0])
    if lo_item is not None and hi_item is None:
        hi_sec, hi_item = lo_sec, hi_sec
    if lo_item is None and hi_item is None and lo_sec <= hi_sec:
        return [(s, None) for s in range(lo_sec, hi_sec + 1)]
    if lo_item is not None and hi_item is not None and lo_sec == hi_sec and lo_item <= hi_item:
        return [(lo_sec, i) for i in range(lo_item, hi_item + 1)]
    return [(lo_sec, lo_item), (hi_sec, hi_item)]


def scan(where: str, source: str) -> tuple[list[Citation], list[str]]:
    """The citations in ``source`` (a file shown as ``where``), and the problems no document can fix:
    a citation whose section number cannot be read, and any citation of the old documents."""
    found: list[Citation] = []
    problems: list[str] = []

    def line_of(pos: int) -> str:
        return f"{where}:{source.count(chr(10), 0, pos) + 1}"

    for start in CITATION_START.finditer(source):
        m = CITATION.match(source, start.start())
        if m is None:
            text = source[start.start() : start.end() + 8].splitlines()[0]
            problems.append(f"{line_of(start.start())}: {text!r}: cannot read the section number")
            continue
        refs = tuple(r for part in re.findall(_REF, m.group("refs")) for r in expand(part))
        found.append(Citation(line_of(m.start()), " ".join(m.group(0).split()), m.group("doc"), refs))
    for old in OLD_CITATION.finditer(source):
        where_old = line_of(old.start())
        problems.append(f"{where_old}: {old.group(0)!r}: cite docs/design.md or docs/style.md instead")
    return found, problems


def resolve(citations: Iterable[Citation], docs: Mapping[str, Outline]) -> list[str]:
    """One message per reference that does not resolve, naming ``file:line`` and the citation."""
    problems: list[str] = []
    for c in citations:
        doc = docs.get(c.doc)
        if doc is None:
            problems.append(f"{c.where}: {c.text!r}: docs/{c.doc}.md does not exist")
            continue
        for sec, item in c.refs:
            if sec not in doc.items:
                problems.append(f"{c.where}: {c.text!r}: docs/{c.doc}.md has no section heading {sec}")
            elif item is not None and item not in doc.items[sec]:
                problems.append(
                    f"{c.where}: {c.text!r}: section {sec} of docs/{c.doc}.md has no numbered item {item}"
                )
    return problems


def load_docs(folder: Path = DOCS) -> dict[str, Outline]:
    return {p.stem: outline(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.md"))}


def scanned_files() -> list[Path]:
    return sorted(p for d in SCANNED for p in (ROOT / d).rglob("*.py") if p.resolve() != THIS)


def scan_repository() -> tuple[list[Citation], list[str]]:
    citations: list[Citation] = []
    problems: list[str] = []
    for path in scanned_files():
        found, bad = scan(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
        citations += found
        problems += bad
    return citations, problems


# -- the repository ---------------------------------------------------------------------------------


def test_every_citation_resolves() -> None:
    citations, problems = scan_repository()
    assert citations, "no docs/<name>.md §N citation found: is the pattern broken?"
    problems += resolve(citations, load_docs())
    assert not problems, "unresolved doc citations:\n" + "\n".join(problems)


def test_docs_keep_the_numbering_code_cites() -> None:
    docs = load_docs()
    design, style = docs["design"], docs["style"]
    assert sorted(design.items) == list(range(1, 7)), sorted(design.items)
    assert sorted(design.items[4]) == list(range(1, 13)), sorted(design.items[4])
    assert sorted(style.items) == list(range(1, 16)), sorted(style.items)
    assert not design.duplicates and not style.duplicates, (design.duplicates, style.duplicates)


def test_every_invariant_has_an_entry() -> None:
    text = (DOCS / "invariants.md").read_text(encoding="utf-8")
    entries = re.findall(r"^## `(\w+)` \((\w+)\)$", text, flags=re.MULTILINE)
    expected = [(str(name), str(SEVERITY[name])) for name in INVARIANTS]
    assert entries == expected, "docs/invariants.md: one '## `name` (severity)' per invariant, in order"


# -- the resolver itself, on an in-memory example --------------------------------------------------

EXAMPLE_DOC = """# Example

## 1. First

```text
## 9. inside a fence: not a heading
```

## §2 Second

1. one
2. two

### A sub-heading, still in section 2

3. three

## 3. Third
"""

EXAMPLE_SOURCE = '''"""See docs/example.md §1 and docs/example.md §2.2, §3."""
a = 1  # docs/example.md §9: no such section (the fenced one does not count)
b = 2  # docs/example.md §2.4: no such item; docs/example.md §1.1 neither
c = 3  # docs/missing.md §1
d = 4  # docs/example.md §2.1–2.3 and docs/example.md §1–3
e = 5  # docs/example.md §2.2–2.4
f = 6  # docs/example.md §x
'''


def test_outline_reads_headings_and_items() -> None:
    doc = outline(EXAMPLE_DOC)
    assert doc.items == {1: set(), 2: {1, 2, 3}, 3: set()}
    assert not doc.duplicates
    assert outline("## 1. a\n## 1. b\n").duplicates == [1]


def test_expand_ranges() -> None:
    assert expand("§4") == [(4, None)]
    assert expand("§4.11") == [(4, 11)]
    assert expand("§4.6–4.8") == [(4, 6), (4, 7), (4, 8)]
    assert expand("§4.6-8") == [(4, 6), (4, 7), (4, 8)]
    assert expand("§1–3") == [(1, None), (2, None), (3, None)]


def test_resolver_reports_what_does_not_resolve() -> None:
    citations, unreadable = scan("pkg/mod.py", EXAMPLE_SOURCE)
    problems = unreadable + resolve(citations, {"example": outline(EXAMPLE_DOC)})
    assert [c.where for c in citations] == [
        "pkg/mod.py:1",
        "pkg/mod.py:1",
        "pkg/mod.py:2",
        "pkg/mod.py:3",
        "pkg/mod.py:3",
        "pkg/mod.py:4",
        "pkg/mod.py:5",
        "pkg/mod.py:5",
        "pkg/mod.py:6",
    ]
    assert sorted(problems) == sorted(
        [
            "pkg/mod.py:7: 'docs/example.md §x': cannot read the section number",
            "pkg/mod.py:2: 'docs/example.md §9': docs/example.md has no section heading 9",
            "pkg/mod.py:3: 'docs/example.md §2.4': section 2 of docs/example.md has no numbered item 4",
            "pkg/mod.py:3: 'docs/example.md §1.1': section 1 of docs/example.md has no numbered item 1",
            "pkg/mod.py:4: 'docs/missing.md §1': docs/missing.md does not exist",
            "pkg/mod.py:6: 'docs/example.md §2.2–2.4': section 2 of docs/example.md has no numbered item 4",
        ]
    )


def test_old_citations_are_reported() -> None:
    old = "DESIGN" + " §4.2"
    _, problems = scan("pkg/old.py", f"x = 1\n# see {old}\n")
    assert problems == [f"pkg/old.py:2: {old!r}: cite docs/design.md or docs/style.md instead"]
