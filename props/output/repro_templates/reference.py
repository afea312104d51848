# @template-only begin
"""The reference's section of a reproducer script (see __init__.py)."""

from __future__ import annotations

from typing import Any

# @template-only end
# -- maskcert's reference (refdecoder), as props/backends/reference.py drives it ------------------------
import refdecoder

# @template-only begin
from props.output.repro_templates.common import OPTIONS, EngineLike, Refusal, VocabInfo, gbnf_parts

# @template-only end


class Vocab:
    def __init__(self, vocab: VocabInfo) -> None:
        self.token_bytes = tuple(vocab["token_bytes"])
        self.eos_ids = frozenset(vocab["eos_ids"])
        self.special_ids = frozenset(vocab["special_ids"])

    def __len__(self) -> int:
        return len(self.token_bytes)


class Engine:
    def __init__(self, vocab: VocabInfo) -> None:
        self.vocab = vocab
        self.ref_vocab = Vocab(vocab)

    def compile(self, spec: dict[str, Any]) -> refdecoder.TokenGrammar:
        kind, source = spec["kind"], spec["source"]
        s: refdecoder.Spec
        if kind == "json_schema":
            profile = OPTIONS.get("profile") or spec.get("profile") or {"allow_duplicate_keys": True}
            s = refdecoder.JsonSchema(source, refdecoder.JsonProfile(**profile))
        elif kind == "regex":
            s = refdecoder.Regex(source)
        elif kind == "gbnf":
            text, root = gbnf_parts(source)
            s = refdecoder.Gbnf(text, root)
        else:
            s = refdecoder.Choice(source)
        return refdecoder.TokenGrammar(refdecoder.compile(s), self.ref_vocab)

    def is_refusal(self, exc: Exception) -> bool:
        return isinstance(exc, (Refusal, refdecoder.Unsupported, refdecoder.LimitExceeded))

    def matcher(self, token_grammar: refdecoder.TokenGrammar) -> Matcher:
        return Matcher(refdecoder.Matcher(token_grammar))


class Matcher:
    def __init__(self, native: refdecoder.Matcher) -> None:
        self.native = native

    def allowed_ids(self) -> list[int]:
        return list(self.native.allowed_ids())

    def accept(self, t: int) -> bool:
        return isinstance(self.native.accept(t), refdecoder.Accepted)

    def is_accepting(self) -> bool:
        return self.native.is_accepting()

    def is_terminated(self) -> bool:
        return self.native.is_terminated()

    def rollback(self, k: int) -> None:
        self.native.rollback(k)

    def fork(self) -> Matcher:
        return Matcher(self.native.fork())

    def forced_bytes(self) -> bytes:
        return self.native.forced_bytes()

    def validate(self, ids: list[int]) -> int:
        return self.native.validate(list(ids))


# @template-only begin
def _conforms(vocab: VocabInfo) -> EngineLike:
    return Engine(vocab)


# @template-only end
