"""Mixed workloads: specs, vocabularies and request schedules for the simulation (deterministic by seed).

A workload always opens with a fixed *coverage* block — one request per serving feature the faults
live in (beams, ``n > 1``, speculation, a stream of multi-byte text, a tiny ``max_tokens``, an explicit
preemption, a cancellation, the same spec on both vocabularies, a refused request, and
``finish_within_max_tokens`` requests with ``max_tokens`` at or just above their spec's shortest
output, one of them too short to fit) — followed by random requests that mix them.

:func:`agent_workload` is the tool-call counterpart (``_agent``): every request calls one of several
tools over a vocabulary with special tokens, its grammar switched when the tool is chosen, with the
same coverage (beams, ``n > 1``, speculation across the tag boundary, jump-forward streams,
preemption, cancellation).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import refdecoder
from refdecoder import Choice, Gbnf, JsonProfile, JsonSchema, Regex, Spec
from refdecoder.sampler import SamplingParams

from ._agent import AGENT_TOOLS, agent_params, special_ids, tool_call_specs
from ._request import Request

__all__ = [
    "Arrival",
    "candidate_specs",
    "available_specs",
    "permuted_vocabulary",
    "default_vocabularies",
    "make_workload",
    "agent_workload",
    "shortest_output",
]


@dataclass(frozen=True)
class Arrival:
    """``request`` is submitted to engine ``engine`` at step ``step``; optionally cancelled at step
    ``cancel_at``, or preempted once it has generated ``preempt_after`` tokens."""

    step: int
    engine: int
    request: Request
    cancel_at: int | None = None
    preempt_after: int | None = None


def candidate_specs(json_profile: JsonProfile | None = None) -> list[Spec]:
    """The specs a workload draws from (those the reference cannot compile here are left out)."""
    prof = json_profile or JsonProfile(allow_duplicate_keys=True, whitespace=1)
    return [
        Choice(["yes", "no", "maybe"]),
        Choice(["café", "naïve", "日本語", "🙂 ok", "Ünïcödé"]),
        Regex(r"[a-z]{1,8}(-[0-9]{1,3})?"),
        Regex(r"(é|ü|ß|中文)+!"),
        JsonSchema(
            {
                "type": "object",
                "properties": {"name": {"type": "string", "maxLength": 6}, "ok": {"type": "boolean"}},
                "required": ["ok"],
                "additionalProperties": False,
            },
            prof,
        ),
        JsonSchema({"type": "array", "items": {"enum": ["a", "ü", 1, None]}, "maxItems": 3}, prof),
        JsonSchema({"enum": ["red", "grün", "蓝"]}, prof),
        Gbnf('root ::= "(" root ")" | "x" | "ü"'),
    ]


def available_specs(specs: Sequence[Spec]) -> tuple[list[Spec], list[str]]:
    """``(specs the reference compiles, notes on the ones it does not)``."""
    ok: list[Spec] = []
    notes: list[str] = []
    for spec in specs:
        try:
            refdecoder.compile(spec)
        except Exception as e:  # noqa: BLE001 - a front-end that is not available here
            notes.append(f"{spec.canonical()[:60]}: {type(e).__name__}: {e}")
            continue
        ok.append(spec)
    return ok, notes


def permuted_vocabulary(vocabulary: Any, seed: int = 0) -> Any:
    """The same tokens under shuffled text ids (specials stay): same size, another fingerprint.

    Two engines with these vocabularies share nothing a grammar may depend on, yet their masks have
    the same shape — the setting where a cache key without the vocabulary fingerprint goes unnoticed.
    """
    table = list(vocabulary.token_bytes)
    text_ids = [i for i, b in enumerate(table) if b is not None]
    shuffled = text_ids[:]
    random.Random(seed).shuffle(shuffled)
    new_table = list(table)
    where = {}
    for old, new in zip(text_ids, shuffled, strict=True):
        new_table[new] = table[old]
        where[old] = new
    return dataclasses.replace(
        vocabulary,
        token_bytes=tuple(new_table),
        byte_fallback_ids=frozenset(where[i] for i in vocabulary.byte_fallback_ids),
        name=f"{vocabulary.name}-permuted",
        codec=None,
    )


def default_vocabularies() -> list[Any]:
    """A trained SentencePiece BPE with byte fallback, and its permutation (two fingerprints)."""
    import tokenizers_matrix

    base = tokenizers_matrix.get("sp-bpe-bytefallback")
    return [base, permuted_vocabulary(base, 1)]


def _params(rng: random.Random) -> SamplingParams:
    kind = rng.random()
    if kind < 0.2:
        return SamplingParams(temperature=0.0)
    if kind < 0.4:
        return SamplingParams(temperature=0.9, top_k=20)
    if kind < 0.55:
        return SamplingParams(temperature=1.0, top_p=0.9, min_p=0.01)
    return SamplingParams(temperature=rng.choice([0.7, 1.0, 1.3]))


def make_workload(
    seed: int, count: int, vocabularies: Sequence[Any], specs: Sequence[Spec], *, max_tokens: int = 24
) -> list[Arrival]:
    """``count`` arrivals over ``len(vocabularies)`` engines (at least the coverage block)."""
    rng = random.Random(seed)
    n_eng = len(vocabularies)
    text_ids = [
        [i for i, b in enumerate(v.token_bytes) if b is not None and b.isascii()] for v in vocabularies
    ]

    def prompt(e: int) -> tuple[int, ...]:
        ids = text_ids[e]
        shared = tuple(ids[(seed + 7 * k) % len(ids)] for k in range(4))  # a common "system" prefix
        return shared + tuple(rng.choice(ids) for _ in range(rng.randint(1, 4)))

    def pick(kind: type, multibyte: bool | None = None, k: int = 0) -> Spec | None:
        """The k-th available spec of ``kind`` (with or without non-ASCII text), else any spec."""
        fits = [s for s in specs if isinstance(s, kind) and (multibyte is None or _non_ascii(s) == multibyte)]
        pool = fits or list(specs)
        return pool[k % len(pool)] if pool else None

    # Coverage block: one request per feature the faults live in.
    greedy, hot = SamplingParams(temperature=0.0), SamplingParams(temperature=1.0)
    last = n_eng - 1
    mt = max_tokens
    cover = [
        # beams (fork, reorder, beam KV), preempted mid-search (resume of every beam)
        Arrival(
            0,
            0,
            Request(prompt(0), pick(Choice, False), greedy, beam_width=3, max_tokens=mt),
            preempt_after=1,
        ),
        Arrival(2, 0, Request(prompt(0), pick(JsonSchema), greedy, beam_width=3, max_tokens=mt)),
        # n > 1 (fork at admission), streamed, preempted (resume by replay)
        Arrival(
            0,
            0,
            Request(prompt(0), pick(Regex, False), hot, n=2, max_tokens=mt, stream=True),
            preempt_after=1,
        ),
        # speculation over multi-byte text (grammar and probability rejections, rollback), streamed
        Arrival(0, 0, Request(prompt(0), pick(Choice, True), hot, speculative=3, max_tokens=mt, stream=True)),
        Arrival(2, 0, Request(prompt(0), pick(Regex, True), hot, speculative=4, max_tokens=mt)),
        Arrival(1, last, Request(prompt(last), pick(Regex, False), greedy, speculative=3, max_tokens=mt)),
        # multi-byte stream (UTF-8 deltas), preempted
        Arrival(
            1, 0, Request(prompt(0), pick(Choice, True), hot, max_tokens=mt, stream=True), preempt_after=1
        ),
        # the same spec on the other vocabulary (compile cache isolation)
        Arrival(1, last, Request(prompt(last), pick(Choice, False), hot, max_tokens=mt)),
        Arrival(3, last, Request(prompt(last), pick(Regex, False), greedy, beam_width=2, max_tokens=mt)),
        # tiny max_tokens (length is never valid output)
        Arrival(1, 0, Request(prompt(0), pick(JsonSchema), hot, max_tokens=2)),
        Arrival(1, 0, Request(prompt(0), pick(JsonSchema), hot, max_tokens=mt), preempt_after=1),
        # unconstrained stream, cancelled mid-way
        Arrival(2, 0, Request(prompt(0), None, hot, max_tokens=mt, stream=True), cancel_at=7),
        # refused at admission: more rows than the engine has
        Arrival(2, 0, Request(prompt(0), pick(Choice), hot, n=99)),
    ]
    # finish_within_max_tokens, with max_tokens at or just above the spec's shortest output: greedy,
    # sampled n=2 (preempted), beams, speculative (on both vocabularies), and one that does not fit
    # (refused at admission).
    budgeted: list[tuple[int, int, type, SamplingParams, dict[str, Any], int, int | None]] = [
        (0, 0, JsonSchema, greedy, {}, 0, None),
        (1, 0, Regex, hot, {"n": 2, "stream": True}, 1, 1),
        (2, 0, Choice, greedy, {"beam_width": 2}, 1, None),
        (1, 0, JsonSchema, hot, {"speculative": 3}, 2, None),
        (2, last, Regex, hot, {"speculative": 2}, 0, None),
        (3, 0, JsonSchema, hot, {}, -1, None),
    ]
    for at, e, kind, params, options, slack, preempt in budgeted:
        fit = _fitting(specs, kind, vocabularies[e], mt)
        if fit is None or fit[1] + slack < 1:
            continue
        limit = min(mt, fit[1] + slack)
        req = Request(prompt(e), fit[0], params, max_tokens=limit, finish_within_max_tokens=True, **options)
        cover.append(Arrival(at, e, req, preempt_after=preempt))
    out: list[Arrival] = list(cover)
    for _ in range(max(0, count - len(cover))):
        step = rng.randint(0, max(1, count // 2))
        eng = 0 if n_eng == 1 or rng.random() < 0.6 else rng.randrange(1, n_eng)
        spec = None if (not specs or rng.random() < 0.15) else rng.choice(list(specs))
        shape = rng.random()
        n, beam, spec_k = 1, 1, 0
        if shape < 0.15:
            beam = rng.choice([2, 3])
        elif shape < 0.35:
            n = 2
        elif shape < 0.6:
            spec_k = rng.choice([2, 3, 4])
        limit = rng.choice([1, 3, 8, max_tokens, max_tokens])
        stop_ids: tuple[int, ...] = ()
        if spec is None and rng.random() < 0.5:
            stop_ids = (rng.choice(text_ids[eng]),)
        req = Request(
            prompt(eng),
            spec,
            _params(rng),
            n=n,
            beam_width=beam,
            max_tokens=limit,
            stop_ids=stop_ids,
            stream=rng.random() < 0.6,
            speculative=spec_k,
        )
        cancel = step + rng.randint(1, 6) if rng.random() < 0.1 else None
        preempt = rng.randint(1, 4) if rng.random() < 0.15 else None
        out.append(Arrival(step, eng, req, cancel, preempt))
    out.sort(key=lambda a: a.step)
    return out


_SHORTEST: dict[tuple[str, str, int], int | None] = {}


def shortest_output(spec: Spec, vocabulary: Any, cap: int) -> int | None:
    """The fewest tokens (EOS included) ``spec``'s shortest output takes in ``vocabulary``, when at most
    ``cap`` and the token budget supports its grammar (no key or value memory); else None."""
    key = (spec.canonical(), str(vocabulary.fingerprint), cap)
    if key not in _SHORTEST:
        if len(_SHORTEST) > 512:
            _SHORTEST.clear()
        try:
            tg = refdecoder.TokenGrammar(refdecoder.compile(spec), vocabulary)
            _SHORTEST[key] = refdecoder.budget_distances(tg, cap).distance(tg.initial(), cap)
        except Exception:  # noqa: BLE001 - does not fit, refused by the budget, or not compilable here
            _SHORTEST[key] = None
    return _SHORTEST[key]


def _fitting(specs: Sequence[Spec], kind: type, vocabulary: Any, cap: int) -> tuple[Spec, int] | None:
    """The first spec of ``kind`` whose shortest output fits ``cap`` tokens, with that length."""
    for spec in specs:
        if isinstance(spec, kind):
            need = shortest_output(spec, vocabulary, cap)
            if need is not None:
                return spec, need
    return None


def _non_ascii(spec: Spec) -> bool:
    return any(ord(ch) > 127 for ch in repr(spec))


def agent_workload(
    seed: int, count: int, vocabulary: Any, *, max_tokens: int = 32, tools: Sequence[Any] = AGENT_TOOLS
) -> list[Arrival]:
    """``count`` tool-call arrivals (at least the coverage block) for one engine over ``vocabulary``,
    which must have the tool-call special tokens (``agent_vocabulary``). Each request offers all of
    ``tools``, two of them, or one (whose name jump-forward may then emit whole)."""
    rng = random.Random(seed)
    names = special_ids(vocabulary)
    offers = [
        tool_call_specs(tools, names),
        tool_call_specs(tools[:2], names),
        tool_call_specs(tools[:1], names),
    ]
    ids = [i for i, b in enumerate(vocabulary.token_bytes) if b is not None and b.isascii() and b.strip()]

    def prompt() -> tuple[int, ...]:
        return tuple(ids[(seed + 11 * k) % len(ids)] for k in range(3)) + tuple(
            rng.choice(ids) for _ in range(rng.randint(1, 3))
        )

    def req(offer: int, params: SamplingParams, **options: Any) -> Request:
        composed, switch = offers[offer]
        options.setdefault("max_tokens", max_tokens)
        return Request(prompt(), composed, params, tools=switch, **options)

    greedy, hot = SamplingParams(temperature=0.0), SamplingParams(temperature=1.0)
    out = [
        # beams across the tag boundary, preempted mid-search (resume replays through the switch)
        Arrival(0, 0, req(0, greedy, beam_width=3), preempt_after=2),
        Arrival(1, 0, req(1, hot, beam_width=2)),
        # n > 1: samples that may choose different tools; jump-forward streams
        Arrival(0, 0, req(0, hot, n=2, stream=True, jump_forward=True), preempt_after=3),
        # speculative drafts across the trigger, the name, the delimiter and the end token
        Arrival(0, 0, req(0, hot, speculative=3, stream=True, jump_forward=True)),
        Arrival(1, 0, req(1, hot, speculative=4)),
        Arrival(1, 0, req(1, greedy, speculative=4)),
        Arrival(3, 0, req(1, hot, speculative=5, stream=True)),
        Arrival(2, 0, req(0, greedy, speculative=2, jump_forward=True)),
        # one tool: after the trigger its whole name is certain
        Arrival(1, 0, req(2, hot, stream=True, jump_forward=True)),
        Arrival(2, 0, req(2, hot, n=2, speculative=3, jump_forward=True), preempt_after=2),
        # cancelled mid-call
        Arrival(2, 0, req(0, hot, stream=True, jump_forward=True), cancel_at=6),
    ]
    for _ in range(max(0, count - len(out))):
        shape = rng.random()
        options: dict[str, Any] = {"stream": rng.random() < 0.6, "jump_forward": rng.random() < 0.6}
        if shape < 0.2:
            options = {"beam_width": rng.choice([2, 3])}
        elif shape < 0.4:
            options["n"] = 2
        elif shape < 0.7:
            options["speculative"] = rng.choice([2, 3, 4])
        step = rng.randint(0, max(1, count // 2))
        preempt = rng.randint(1, 5) if rng.random() < 0.2 else None
        out.append(
            Arrival(step, 0, req(rng.randrange(3), agent_params(rng), **options), preempt_after=preempt)
        )
    out.sort(key=lambda a: a.step)
    return out
