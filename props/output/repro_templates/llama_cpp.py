# @template-only begin
"""llama.cpp's (llama-cpp-python's) section of a reproducer script (see __init__.py)."""

from __future__ import annotations

# @template-only end
# -- llama.cpp's grammar sampler, as props/backends/llama_cpp.py drives it ----------------------------
import ctypes
import json
import os
import struct  # noqa: F401 - for the @source definitions below
import tempfile
from collections.abc import Mapping, Sequence  # noqa: F401 - for the @source definitions below
from typing import Any

from llama_cpp import llama_cpp as ll
from llama_cpp.llama_grammar import json_schema_to_gbnf

# @template-only begin
from props.backends.llama_cpp import _REFUSAL_PREFIXES, gbnf_choice, gpt2_byte_text, vocab_gguf  # noqa: F401
from props.output.repro_templates.common import (
    EngineLike,
    HistoryMatcher,
    Refusal,
    VocabInfo,
    gbnf_parts,
)

# @template-only end
# @source props.backends.llama_cpp:_REFUSAL_PREFIXES,gpt2_byte_text,vocab_gguf,gbnf_choice

_LOG_SINK = ll.llama_log_callback(lambda level, text, user_data: None)  # llama.cpp's log, silenced


class Engine:
    """A vocabulary-only GGUF written from the vocabulary file, loaded with ``vocab_only``."""

    def __init__(self, vocab: VocabInfo) -> None:
        self.vocab = vocab
        ll.llama_log_set(_LOG_SINK, ctypes.c_void_p(0))
        ll.llama_backend_init()
        data = vocab_gguf(vocab["token_bytes"], vocab["eos_ids"], vocab["special_names"])
        fd, path = tempfile.mkstemp(suffix=".gguf")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        params = ll.llama_model_default_params()
        params.vocab_only = True
        self.model = ll.llama_model_load_from_file(path.encode(), params)
        os.unlink(path)
        if not self.model:
            raise RuntimeError("llama_model_load_from_file returned NULL for the vocabulary GGUF")
        self.lvocab = ll.llama_model_get_vocab(self.model)

    def compile(self, spec: dict[str, Any]) -> Any:
        kind, source = spec["kind"], spec["source"]
        if kind == "gbnf":
            text, root = gbnf_parts(source)
        elif kind == "json_schema":
            if source is False:
                raise Refusal("llama.cpp: json_schema_to_gbnf has no form of the empty schema 'false'")
            text, root = json_schema_to_gbnf(json.dumps({} if source is True else source)), "root"
        elif kind == "choice":
            if not source:
                raise Refusal("llama.cpp: an empty choice list has no GBNF form")
            text, root = gbnf_choice(source), "root"
        else:
            raise Refusal("llama.cpp's grammar sampler has no regex front-end (GBNF only)")
        sampler = ll.llama_sampler_init_grammar(self.lvocab, text.encode("utf-8"), root.encode("utf-8"))
        if not sampler:
            if kind == "json_schema":  # the converter wrote a grammar llama.cpp's parser rejects
                raise RuntimeError(
                    "llama_sampler_init_grammar returned NULL for json_schema_to_gbnf's grammar"
                )
            raise Refusal("llama.cpp rejects the grammar (llama_sampler_init_grammar returned NULL)")
        return sampler

    def is_refusal(self, exc: Exception) -> bool:
        if isinstance(exc, Refusal):
            return True
        return type(exc) in (AssertionError, ValueError) and str(exc).startswith(_REFUSAL_PREFIXES)

    def matcher(self, sampler: Any) -> Matcher:
        return Matcher(self.vocab, sampler, ll.llama_sampler_clone(sampler), [])


class Matcher(HistoryMatcher):
    """A clone of the compiled sampler; llama.cpp has no undo, so a rollback replays on a fresh clone."""

    def __init__(self, vocab: VocabInfo, initial: Any, sampler: Any, ids: list[int]) -> None:
        super().__init__(vocab, ids)
        self.initial, self.sampler = initial, sampler

    def _apply(self, ids: list[int]) -> list[int]:
        """``llama_sampler_apply`` on candidates ``ids`` with logit 0: those it leaves finite."""
        data = (ll.llama_token_data * len(ids))(*(ll.llama_token_data(t, 0.0, 0.0) for t in ids))
        cur = ll.llama_token_data_array(
            data=ctypes.cast(data, ll.llama_token_data_p), size=len(ids), selected=-1, sorted=False
        )
        ll.llama_sampler_apply(self.sampler, ctypes.byref(cur))
        return [t for k, t in enumerate(ids) if data[k].logit != float("-inf")]

    def allowed_ids(self) -> list[int]:
        return [] if self.is_terminated() else self._apply(list(range(self.vocab["size"])))

    def accept(self, t: int) -> bool:
        # llama.cpp aborts on a token its grammar cannot take: ask its own mask first
        if not self.can_take(t) or not self._apply([t]):
            return False
        ll.llama_sampler_accept(self.sampler, t)
        self.ids.append(t)
        return True

    def is_accepting(self) -> bool:
        return not self.is_terminated() and bool(self._apply([self.vocab["eos_ids"][0]]))

    def undo(self, k: int) -> None:
        self.sampler = ll.llama_sampler_clone(self.initial)
        for t in self.ids[: len(self.ids) - k]:
            ll.llama_sampler_accept(self.sampler, t)

    def fork(self) -> Matcher:
        return Matcher(self.vocab, self.initial, ll.llama_sampler_clone(self.sampler), list(self.ids))

    def forced_bytes(self) -> bytes:
        raise NotImplementedError("llama.cpp's grammar sampler has no jump-forward API")

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
