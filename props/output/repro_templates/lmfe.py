# @template-only begin
"""lm-format-enforcer's section of a reproducer script (see __init__.py)."""

from __future__ import annotations

from typing import Any

# @template-only end
# -- lm-format-enforcer, as props/backends/lmfe.py drives it ------------------------------------------
from lmformatenforcer import (
    CharacterLevelParser,
    CharacterLevelParserConfig,
    JsonSchemaParser,
    LMFormatEnforcerException,
    RegexParser,
    StringParser,
    TokenEnforcer,
    TokenEnforcerTokenizerData,
    UnionParser,
)

# @template-only begin
from props.backends.lmfe import _REFUSAL_PREFIXES
from props.output.repro_templates.common import (
    OPTIONS,
    EngineLike,
    HistoryMatcher,
    Refusal,
    VocabInfo,
    eos_allowed,
)

# @template-only end
# @source props.backends.lmfe:_REFUSAL_PREFIXES


class Engine:
    def __init__(self, vocab: VocabInfo) -> None:
        self.vocab = vocab
        regular = [
            (i, data.decode("utf-8", errors="replace"), False)
            for i, data in enumerate(vocab["token_bytes"])
            if data is not None
        ]
        table = vocab["token_bytes"]

        def decode(ids: list[int]) -> str:
            data = b"".join(b for b in (table[i] for i in ids) if b is not None)
            return data.decode("utf-8", errors="replace").rstrip("\ufffd")

        import inspect

        params = inspect.signature(TokenEnforcerTokenizerData.__init__).parameters
        eos: Any = list(vocab["eos_ids"])
        if "List" not in str(params["eos_token_id"].annotation):  # one EOS id before 0.10
            eos = eos[0]
        if "use_bitmask" in params:
            self.data = TokenEnforcerTokenizerData(regular, decode, eos, False, vocab["size"])
        else:
            self.data = TokenEnforcerTokenizerData(regular, decode, eos)

    def compile(self, spec: dict[str, Any]) -> TokenEnforcer:
        import dataclasses

        fields = {f.name for f in dataclasses.fields(CharacterLevelParserConfig)}
        options: dict[str, Any] = {"alphabet": self.data.tokenizer_alphabet}
        if "max_consecutive_whitespaces" in fields:  # config fields from 0.10 (a constant before)
            options["max_consecutive_whitespaces"] = OPTIONS["max_consecutive_whitespaces"]
        if "force_json_field_order" in fields:
            options["force_json_field_order"] = False
        if "max_json_array_length" in fields:
            options["max_json_array_length"] = 0
        config = CharacterLevelParserConfig(**options)
        kind, source = spec["kind"], spec["source"]
        parser: CharacterLevelParser
        if kind == "json_schema":
            if source is False:
                raise Refusal("lm-format-enforcer: JsonSchemaParser has no form of the empty schema 'false'")
            parser = JsonSchemaParser(None if source is True else source, config)
        elif kind == "regex":
            parser = RegexParser(source, config)
        elif kind == "choice":
            if not source:
                raise Refusal("lm-format-enforcer: an empty choice list has no parser form")
            parser = UnionParser([StringParser(o) for o in source])
        else:
            raise Refusal("lm-format-enforcer has no context-free grammar parser for GBNF")
        enforcer = TokenEnforcer(self.data, parser)
        parser.config = config  # TokenEnforcer replaces it; the adapter puts its own back
        return enforcer

    def is_refusal(self, exc: Exception) -> bool:
        if isinstance(exc, (Refusal, LMFormatEnforcerException)):
            return True
        for cls in type(exc).__mro__:
            if (cls.__module__.startswith("pydantic") and cls.__name__ == "ValidationError") or (
                cls.__module__.startswith("interegular") and cls.__name__ in ("Unsupported", "InvalidSyntax")
            ):
                return True
        return type(exc) in (Exception, ValueError) and str(exc).startswith(_REFUSAL_PREFIXES)

    def matcher(self, enforcer: TokenEnforcer) -> Matcher:
        return Matcher(self.vocab, enforcer, [])


class Matcher(HistoryMatcher):
    """lm-format-enforcer's state is the ids so far: rollback and fork only cut or copy them."""

    def __init__(self, vocab: VocabInfo, enforcer: TokenEnforcer, ids: list[int]) -> None:
        super().__init__(vocab, ids)
        self.enforcer = enforcer

    def allowed_ids(self) -> list[int]:
        if self.is_terminated():
            return []
        allowed = self.enforcer.get_allowed_tokens(list(self.ids))
        return sorted(set(getattr(allowed, "allowed_tokens", allowed)))  # a list before 0.11

    def accept(self, t: int) -> bool:
        if not self.can_take(t) or t not in self.allowed_ids():
            return False
        self.ids.append(t)
        return True

    def is_accepting(self) -> bool:
        return not self.is_terminated() and eos_allowed(self.vocab, self.allowed_ids())

    def fork(self) -> Matcher:
        return Matcher(self.vocab, self.enforcer, list(self.ids))

    def forced_bytes(self) -> bytes:
        raise NotImplementedError("lm-format-enforcer has no jump-forward API")

    def validate(self, ids: list[int]) -> int:
        probe, n = self.fork(), 0
        for t in ids:
            if not probe.accept(t):
                break
            n += 1
        return n


# @template-only begin
def _conforms(vocab: VocabInfo) -> EngineLike:
    return Engine(vocab)


# @template-only end
