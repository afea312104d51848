"""xgrammar's transformers integration (``xgrammar.contrib.hf.LogitsProcessor``) behind the Backend protocol.

The ``xgrammar`` adapter certifies xgrammar's matcher; this one certifies what a transformers user
runs: the logits processor, fed the way ``model.generate`` feeds it, on real logits tensors, with the
vocabulary set up the way xgrammar's documentation says (``TokenizerInfo.from_huggingface(tokenizer,
vocab_size=config.vocab_size)``, the model's padded width). A bug in the glue (the vocabulary size,
padded ids, EOS, which row gets which mask) shows up as a mask that differs from the reference's.

Theory of operation
-------------------
*Compiling* is the ``xgrammar`` adapter's (same options, same refusals), over a ``TokenizerInfo``
whose ``vocab_size`` is the logits width: the next multiple of ``pad_to`` above the vocabulary
(models pad their embedding; at least one padding id, so padded ids are always exercised;
``pad_to=1`` means no padding). With ``tokenizer_info="huggingface"``
(the default) and a vocabulary loaded from a Hugging Face ``tokenizer.json``, the info comes from
``TokenizerInfo.from_huggingface`` on a ``PreTrainedTokenizerFast`` over that tokenizer (xgrammar
reads the token bytes itself, as in a user's process; the tokenizer is the vocabulary's codec, i.e.
the file as ``tokenizers_matrix`` loads it, with the dummy prefix space turned off); otherwise from
the raw token bytes, as the ``xgrammar`` adapter builds it. A difference that ``tokenizer_info="raw"``
does not show is then in xgrammar's reading of the tokenizer, not in its grammar engine.

*A matcher* is one generated sequence: the ids accepted so far and one processor. Reading the mask
at length ``n`` drives the processor as ``generate`` does: one call with the prompt, then one call per
id with ``input_ids`` grown by that id (the processor accepts ``input_ids[:, -1]``), each on a fresh
float32 logits tensor ``[1, width]`` drawn from a generator seeded by the step. The mask is the set of
ids whose logit the processor left above ``-inf``. The processor is one-shot (its docstring: "can only
be used once"): a fork copies it with its ``GrammarMatcher`` s forked (as a beam-search integration
would; where the matchers cannot fork, the ids are replayed on a new processor), and a rollback past
what the processor has seen rolls its matchers back one id further, so that the next call re-feeds
that id and computes the mask there (``GrammarMatcher.rollback``; where that is not offered, or back
at the start, the ids are replayed on a new processor when the mask is next read);
``accept`` of an id the processor masked is a rejection (``generate`` could never sample it), and an
accepted EOS ends the sequence (``generate`` stops calling the processor).

Besides the mask, each call is checked for what no mask comparison could see, and a violation raises
:class:`ProcessorGlueError` (a ``crash`` finding): an allowed logit whose value changed, a padding id
(``>= len(vocabulary)``) left finite, an output of another shape.
"""

from __future__ import annotations

import copy
import functools
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
import xgrammar as xgr
from xgrammar.contrib import hf as xgr_hf

from props.backends._common import check_rollback, reject_at_edge
from props.backends.xgrammar import FEATURES, XGrammarBackend
from props.contract.backend import (
    Accepted,
    Backend,
    BackendMatcher,
    Compiled,
    CompileOutcome,
    DeclaredProfile,
    Rejected,
    TokenOutcome,
)
from refdecoder import Spec
from refdecoder.bitmask import pack_ids
from refdecoder.errors import MaskcertError
from tokenizers_matrix import Vocabulary

__all__ = ["XGrammarHFBackend", "XGrammarHFMatcher", "ProcessorGlueError", "PROMPT", "padded_width"]

#: The prompt every sequence starts from (the processor reads only what follows it).
PROMPT: tuple[int, ...] = (0, 0, 0)

TokenizerInfoSource = Literal["huggingface", "raw"]


class ProcessorGlueError(MaskcertError, RuntimeError):
    """The logits processor did something to the logits that no mask explains."""

    def __init__(self, step: int, what: str) -> None:
        self.step = step
        self.what = what
        super().__init__(f"xgrammar.contrib.hf.LogitsProcessor at step {step}: {what}")


def padded_width(vocab_size: int, pad_to: int) -> int:
    """The logits width: the next multiple of ``pad_to`` above the vocabulary (at least one padding
    id, so padded ids are always exercised); ``pad_to=1`` means no padding."""
    return vocab_size if pad_to == 1 else (vocab_size // pad_to + 1) * pad_to


@functools.lru_cache(maxsize=512)
def _logits(step: int, width: int) -> torch.Tensor:
    """The logits of step ``step``: standard normal, from a generator seeded by the step (cached;
    callers pass clones to the processor, which masks in place)."""
    gen = torch.Generator().manual_seed(0x5EED + step)
    return torch.randn((1, width), generator=gen, dtype=torch.float32)


def _fork_processor(proc: Any) -> Any | None:
    """A copy of ``proc`` in the same state, its ``GrammarMatcher`` s forked (``GrammarMatcher.fork``,
    xgrammar 0.2.x), as a beam-search integration forks them; None when the processor does not keep
    matchers that can fork (then the fork replays its ids on a new processor)."""
    matchers = getattr(proc, "matchers", None)
    if not isinstance(matchers, list) or not matchers:
        return None
    if not all(callable(getattr(m, "fork", None)) for m in matchers):
        return None
    twin = copy.copy(proc)
    twin.matchers = [m.fork() for m in matchers]
    bitmask = getattr(proc, "token_bitmask", None)
    if isinstance(bitmask, torch.Tensor):
        twin.token_bitmask = bitmask.clone()
    return twin


def _rollback_processor(proc: Any, k: int) -> bool:
    """Roll ``proc``'s ``GrammarMatcher`` s back ``k`` ids (``GrammarMatcher.rollback``, unbounded in
    xgrammar 0.2.x), as a speculative-decoding integration would; False where they cannot."""
    matchers = getattr(proc, "matchers", None)
    if FEATURES["bounded_rollback"] or not isinstance(matchers, list) or not matchers:
        return False
    if not all(callable(getattr(m, "rollback", None)) for m in matchers):
        return False
    for m in matchers:
        m.rollback(k)
    return True


@dataclass(frozen=True, eq=False)
class _Handle:
    grammar: Any  # xgrammar.CompiledGrammar
    vocab_size: int
    width: int
    eos_ids: frozenset[int]
    token_bytes: tuple[bytes | None, ...] = field(repr=False)


def _hf_tokenizer(vocabulary: Vocabulary) -> Any | None:
    """A ``PreTrainedTokenizerFast`` over the vocabulary's Hugging Face tokenizer, if it has one."""
    tokenizer = getattr(vocabulary.codec, "tokenizer", None)
    try:
        from tokenizers import Tokenizer
        from transformers import PreTrainedTokenizerFast
    except ImportError:
        return None
    if not isinstance(tokenizer, Tokenizer):
        return None
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer)


class XGrammarHFBackend(XGrammarBackend):
    """xgrammar through ``xgrammar.contrib.hf.LogitsProcessor``; options as :class:`XGrammarBackend`,
    plus ``pad_to`` (the logits width is the next multiple of it above the vocabulary) and
    ``tokenizer_info`` (``"huggingface"``: ``TokenizerInfo.from_huggingface`` where the vocabulary
    has a Hugging Face tokenizer, else the raw bytes; ``"raw"``: always the raw bytes)."""

    name = "xgrammar-hf"

    def __init__(
        self,
        any_whitespace: bool = True,
        max_whitespace_cnt: int | None = None,
        strict_mode: bool = True,
        max_threads: int = 8,
        cache_enabled: bool = True,
        max_compilers: int = 4,
        pad_to: int = 64,
        tokenizer_info: TokenizerInfoSource = "huggingface",
    ) -> None:
        if not isinstance(pad_to, int) or isinstance(pad_to, bool) or pad_to < 1:
            raise ValueError(f"pad_to={pad_to!r}: expected an int >= 1 (1: logits as wide as the vocabulary)")
        if tokenizer_info not in ("huggingface", "raw"):
            raise ValueError(f"tokenizer_info={tokenizer_info!r}: expected 'huggingface' or 'raw'")
        self.pad_to = pad_to
        self.tokenizer_info = tokenizer_info
        super().__init__(
            any_whitespace, max_whitespace_cnt, strict_mode, max_threads, cache_enabled, max_compilers
        )
        self.profile: DeclaredProfile = _hf_profile(self.profile, pad_to, tokenizer_info)

    def _build_compiler(self, vocabulary: Vocabulary) -> xgr.GrammarCompiler:
        width = padded_width(len(vocabulary.token_bytes), self.pad_to)
        stop = sorted(vocabulary.eos_ids)
        hf = _hf_tokenizer(vocabulary) if self.tokenizer_info == "huggingface" else None
        if hf is not None:
            info = xgr.TokenizerInfo.from_huggingface(hf, vocab_size=width, stop_token_ids=stop)
        else:
            encoded = [b if b is not None else b"" for b in vocabulary.token_bytes]
            info = xgr.TokenizerInfo(encoded, xgr.VocabType.RAW, vocab_size=width, stop_token_ids=stop)
        return xgr.GrammarCompiler(info, max_threads=self.max_threads, cache_enabled=self.cache_enabled)

    def _tag_compiler(self, vocabulary: Vocabulary) -> xgr.GrammarCompiler:
        # structural tags on the processor's own TokenizerInfo: from_huggingface gives special tokens
        # their text, as production does (with tokenizer_info="raw" they are empty, and a tag cannot
        # name them)
        return self._compiler(vocabulary)

    def compile(self, spec: Spec, vocabulary: Vocabulary) -> CompileOutcome:
        t0 = time.perf_counter()
        outcome = super().compile(spec, vocabulary)
        if not isinstance(outcome, Compiled):
            return outcome
        size = len(vocabulary.token_bytes)
        handle = _Handle(
            outcome.handle.grammar,
            size,
            padded_width(size, self.pad_to),
            frozenset(vocabulary.eos_ids),
            tuple(vocabulary.token_bytes),
        )
        return Compiled(handle, (time.perf_counter() - t0) * 1000)

    def matcher(self, compiled: Compiled) -> XGrammarHFMatcher:  # type: ignore[override]
        return XGrammarHFMatcher(compiled.handle, [])


def _hf_profile(base: DeclaredProfile, pad_to: int, source: str) -> DeclaredProfile:
    return replace(
        base,
        notes=(
            *base.notes,
            "driven through xgrammar/contrib/hf.py LogitsProcessor as model.generate calls it: prompt first, "
            "then input_ids grown by one accepted id per call; mask = ids whose logit stays above -inf",
            f"TokenizerInfo vocab_size = logits width = next multiple of {pad_to} above the vocabulary (padded), "
            f"built {'by TokenizerInfo.from_huggingface where the vocabulary has a tokenizer.json' if source == 'huggingface' else 'from the raw token bytes'}",
        ),
    )


class XGrammarHFMatcher:
    """One sequence through the processor (see the module docstring)."""

    def __init__(self, handle: _Handle, ids: list[int]) -> None:
        self._h = handle
        self._ids = ids
        self._proc: Any = None
        self._fed = -1  # ids the processor has seen (-1: not called yet)
        self._mask: np.ndarray | None = None

    def accepted_ids(self) -> list[int]:
        return list(self._ids)

    def _state_id(self) -> str:
        return f"xgrammar-hf@{len(self._ids)}"

    def _call(self, step: int) -> np.ndarray:
        h = self._h
        input_ids = torch.tensor([[*PROMPT, *self._ids[:step]]], dtype=torch.int64)
        scores = _logits(step, h.width)
        out = self._proc(input_ids, scores.clone())
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (1, h.width):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise ProcessorGlueError(step, f"returned {shape}; expected a tensor of shape (1, {h.width})")
        kept = out[0] > float("-inf")
        changed = kept & (out[0] != scores[0])
        if bool(changed.any()):
            t = int(torch.nonzero(changed)[0])
            raise ProcessorGlueError(
                step,
                f"changed the logit of allowed token {t} from {float(scores[0, t])} to {float(out[0, t])}",
            )
        ids = torch.nonzero(kept).flatten().numpy()
        if ids.size and int(ids[-1]) >= h.vocab_size:
            raise ProcessorGlueError(
                step,
                f"left padding id {int(ids[-1])} finite (the vocabulary has {h.vocab_size} ids, "
                f"the logits {h.width})",
            )
        return pack_ids(ids, h.vocab_size)

    def mask(self) -> np.ndarray:
        if self.is_terminated():
            return np.zeros((self._h.vocab_size + 31) // 32, dtype=np.int32)
        if self._proc is None or self._fed > len(self._ids):  # a fork, or a rollback past what it saw
            self._proc = xgr_hf.LogitsProcessor(self._h.grammar)
            self._fed = -1
        while self._fed < len(self._ids):
            self._fed += 1
            self._mask = self._call(self._fed)
        assert self._mask is not None
        return self._mask.copy()

    def _allows(self, token_id: int) -> bool:
        mask = self.mask()
        return bool(int(mask[token_id >> 5]) >> (token_id & 31) & 1)

    def accept(self, token_id: int) -> TokenOutcome:
        h = self._h
        edge = reject_at_edge(token_id, h.vocab_size, h.token_bytes, self._state_id(), self.is_terminated())
        if edge is not None:
            return edge
        data = h.token_bytes[token_id]
        if not self._allows(token_id):
            return Rejected(
                token_id, data, self._state_id(), "xgrammar.contrib.hf.LogitsProcessor left its logit at -inf"
            )
        self._ids.append(token_id)
        return Accepted(token_id, data, self._state_id(), token_id in h.eos_ids)

    def is_accepting(self) -> bool:
        return not self.is_terminated() and any(self._allows(t) for t in self._h.eos_ids)

    def is_terminated(self) -> bool:
        return bool(self._ids) and self._ids[-1] in self._h.eos_ids

    def rollback(self, k: int) -> None:
        check_rollback(k, len(self._ids))
        if not k:
            return
        del self._ids[len(self._ids) - k :]
        if self._proc is None or self._fed <= len(self._ids):
            return  # the processor never saw the dropped ids
        # Roll its matchers back to one id short, so that the next call re-feeds that id and computes the
        # mask there (each call after the first accepts input_ids[:, -1]); at the start, or where the
        # matchers cannot roll back, the next mask replays the ids on a new processor.
        back = self._fed - len(self._ids) + 1
        if self._ids and _rollback_processor(self._proc, back):
            self._fed = len(self._ids) - 1
        else:
            self._proc = None

    def fork(self) -> XGrammarHFMatcher:
        twin = XGrammarHFMatcher(self._h, list(self._ids))
        if self._proc is not None and self._fed <= len(self._ids):
            native = _fork_processor(self._proc)
            if native is not None:
                twin._proc, twin._fed, twin._mask = native, self._fed, self._mask
        return twin

    def __repr__(self) -> str:
        return f"XGrammarHFMatcher(num_accepted={len(self._ids)}, terminated={self.is_terminated()})"


if TYPE_CHECKING:  # mypy checks that the adapter satisfies the protocols (docs/style.md §14)

    def _conforms(backend: XGrammarHFBackend, matcher: XGrammarHFMatcher) -> tuple[Backend, BackendMatcher]:
        return backend, matcher
