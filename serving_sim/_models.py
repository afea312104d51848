"""Models the loop runs: an adversarial logits model, a noisy draft for speculation, and a tiny
random-weights Llama with a real KV cache (docs/design.md §5 "Models").

Every model speaks the same small protocol. A :class:`KVHandle` records the tokens whose keys and
values it holds (``tokens``) next to the model's own cache object (``state``); ``forward`` feeds new
tokens to each row's handle and returns the logits of the last ``n_out`` positions of each row.
Handles are forked for beams and ``n > 1`` and truncated after speculative rejections, so the
``tokens`` record is what the checker compares against the sequence (the ``kv`` invariant).
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from refdecoder.sampler import SamplingParams

__all__ = ["KVHandle", "Model", "Draft", "Guide", "AdversarialModel", "NoisyDraft", "TinyLlamaModel"]


@dataclass(eq=False)
class KVHandle:
    tokens: list[int] = field(default_factory=list)
    state: Any = None


class Model(Protocol):
    name: str
    vocab_size: int

    def new_kv(self) -> KVHandle: ...

    def forward(
        self, rows: Sequence[tuple[KVHandle, Sequence[int]]], n_out: Sequence[int]
    ) -> list[torch.Tensor]:
        """Feed ``new`` to each ``(kv, new)``; per row, float32 logits ``[n_out, V]`` of its last positions."""
        ...

    def fork_kv(self, kv: KVHandle) -> KVHandle: ...

    def truncate_kv(self, kv: KVHandle, length: int) -> None: ...


Guide = Callable[[Sequence[int]], "np.ndarray | None"]


class Draft(Protocol):
    name: str

    def propose(
        self,
        context: Sequence[int],
        k: int,
        params: SamplingParams,
        generator: torch.Generator,
        guide: Guide | None = None,
    ) -> tuple[list[int], torch.Tensor]:
        """``k`` draft tokens after ``context`` and the distributions ``q`` [k, V] (float64) they were
        drawn from. ``guide(drafted)`` may return a grammar mask row for the next draft position."""
        ...


def _rng(seed: int, context: Sequence[int], salt: bytes = b"") -> np.random.Generator:
    h = hashlib.blake2b(digest_size=16)
    h.update(salt + seed.to_bytes(8, "little", signed=False))
    h.update(np.asarray(context, dtype="<i8").tobytes())
    return np.random.default_rng(int.from_bytes(h.digest(), "little"))


class AdversarialModel:
    """Logits that make grammar bugs observable, a pure function of ``(seed, context)``.

    Per position: Gaussian noise, a bias toward long tokens and byte-fallback tokens, a few "hot"
    random tokens with large logits (almost always tokens the grammar forbids), EOS boosted strongly
    in ``eos_rate`` of positions (and mildly elsewhere). In ``collapse_rate`` of positions every
    logit but the hot set is -inf, so a grammar often has no finite allowed token there (the
    ``constraint_violation`` path); in ``nan_rate`` of positions a few logits are NaN.
    """

    name = "adversarial"

    def __init__(
        self,
        vocabulary: Any,
        seed: int = 0,
        *,
        eos_rate: float = 0.3,
        collapse_rate: float = 0.04,
        nan_rate: float = 0.03,
        hot: int = 6,
    ) -> None:
        token_bytes = vocabulary.token_bytes
        self.vocab_size = len(token_bytes)
        self.seed = int(seed)
        self.eos_rate = eos_rate
        self.collapse_rate = collapse_rate
        self.nan_rate = nan_rate
        self.hot = hot
        self.eos_ids = np.asarray(sorted(vocabulary.eos_ids), dtype=np.int64)
        lengths = np.asarray([len(b) if b else 0 for b in token_bytes], dtype=np.float32)
        bias = 0.3 * np.minimum(lengths, 12.0)
        fallback = sorted(getattr(vocabulary, "byte_fallback_ids", ()))
        if fallback:
            bias[np.asarray(fallback, dtype=np.int64)] += 2.5
        # Bytes >= 0x80 as single tokens (the byte vocabulary) count as byte fallback too.
        single_high = [i for i, b in enumerate(token_bytes) if b is not None and len(b) == 1 and b[0] >= 0x80]
        if single_high:
            bias[np.asarray(single_high, dtype=np.int64)] += 1.5
        bias[self.eos_ids] += 1.0
        self._bias = bias

    def logits_for(self, context: Sequence[int]) -> np.ndarray:
        rng = _rng(self.seed, context)
        v = self.vocab_size
        x = rng.standard_normal(v).astype(np.float32) * 1.5 + self._bias
        hot = rng.integers(0, v, size=self.hot)
        x[hot] += rng.uniform(3.0, 7.0, size=self.hot).astype(np.float32)
        if rng.random() < self.eos_rate:
            x[self.eos_ids] += 8.0
        if rng.random() < self.collapse_rate:
            keep = x[hot].copy()
            x[:] = -np.inf
            x[hot] = keep
        if rng.random() < self.nan_rate:
            x[rng.integers(0, v, size=3)] = np.nan
        return x

    def new_kv(self) -> KVHandle:
        return KVHandle()

    def forward(
        self, rows: Sequence[tuple[KVHandle, Sequence[int]]], n_out: Sequence[int]
    ) -> list[torch.Tensor]:
        out: list[torch.Tensor] = []
        for (kv, new), n in zip(rows, n_out, strict=True):
            base = len(kv.tokens)
            kv.tokens.extend(int(t) for t in new)
            ctx = kv.tokens
            rows_out = [self.logits_for(ctx[: base + i + 1]) for i in range(len(new) - n, len(new))]
            out.append(torch.from_numpy(np.stack(rows_out)))
        return out

    def fork_kv(self, kv: KVHandle) -> KVHandle:
        return KVHandle(list(kv.tokens))

    def truncate_kv(self, kv: KVHandle, length: int) -> None:
        del kv.tokens[length:]


def _probs(z: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """The distribution a row samples from (temperature only; greedy is one-hot), float64."""
    z = torch.nan_to_num(z.to(torch.float64), nan=-math.inf, posinf=math.inf, neginf=-math.inf)
    top = z == math.inf
    if bool(top.any()):  # infinitely likely tokens share all the mass
        return top.to(torch.float64) / float(top.sum())
    if not bool(torch.isfinite(z).any()):
        return torch.full_like(z, 1.0 / z.shape[0])
    if params.greedy:
        p = torch.zeros_like(z)
        p[int(z.argmax())] = 1.0
        return p
    return torch.softmax(z / params.temperature, dim=-1)


class NoisyDraft:
    """A draft model for speculation: the target's logits plus Gaussian noise (a pure function of
    ``(seed, context)``).

    With a ``guide`` (a fork of the sequence's matcher, as engines that constrain their drafts use),
    each draft token comes from the grammar-masked draft distribution, except that with probability
    ``stray`` it comes from the unmasked one — as drafts that ignore the grammar do. The reported
    ``q`` is that mixture, so speculative sampling stays exact.
    """

    name = "noisy-draft"

    def __init__(self, target: Model, sigma: float = 2.0, seed: int = 1, stray: float = 0.15) -> None:
        self.target = target
        self.sigma = sigma
        self.seed = int(seed)
        self.stray = stray

    def propose(
        self,
        context: Sequence[int],
        k: int,
        params: SamplingParams,
        generator: torch.Generator,
        guide: Guide | None = None,
    ) -> tuple[list[int], torch.Tensor]:
        kv = self.target.new_kv()
        ctx = list(context)
        drafts: list[int] = []
        qs: list[torch.Tensor] = []
        new: list[int] = list(ctx)
        for _ in range(k):
            logits = self.target.forward([(kv, new)], [1])[0][-1]
            noise = _rng(self.seed, ctx, b"draft").standard_normal(logits.shape[0]) * self.sigma
            z = logits.to(torch.float64) + torch.from_numpy(noise)
            q = _probs(z, params)
            row = guide(drafts) if guide is not None else None
            if row is not None:
                from refdecoder.sampler import apply_token_bitmask

                zm = torch.nan_to_num(z, nan=-math.inf, posinf=math.inf, neginf=-math.inf)
                apply_token_bitmask(zm, torch.from_numpy(np.array(row, dtype=np.int32)))
                if bool(torch.isfinite(zm).any()):
                    q = (1.0 - self.stray) * _probs(zm, params) + self.stray * q
            tok = int(torch.multinomial(q, 1, generator=generator))
            drafts.append(tok)
            qs.append(q)
            ctx.append(tok)
            new = [tok]
        v = getattr(self.target, "vocab_size", 0)
        return drafts, torch.stack(qs) if qs else torch.zeros((0, v), dtype=torch.float64)


class TinyLlamaModel:
    """A tiny random-weights ``transformers`` Llama (no download) with a real ``DynamicCache``.

    Rows run one forward each (their lengths differ); forking deep-copies the cache, truncation
    crops it. Logits are float32.
    """

    name = "tiny-llama"

    def __init__(
        self, vocab_size: int, seed: int = 0, *, layers: int = 2, hidden: int = 64, heads: int = 4
    ) -> None:
        from transformers import LlamaConfig, LlamaForCausalLM
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        self.vocab_size = int(vocab_size)
        self.config = LlamaConfig(
            vocab_size=self.vocab_size,
            hidden_size=hidden,
            intermediate_size=2 * hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 2),
            max_position_embeddings=2048,
            bos_token_id=None,
            eos_token_id=None,
            pad_token_id=None,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model = LlamaForCausalLM(self.config).eval()
            # Random init gives near-uniform logits; sharpen them so sampling has structure.
            with torch.no_grad():
                self.model.lm_head.weight.mul_(8.0)

    def new_kv(self) -> KVHandle:
        from transformers import DynamicCache

        return KVHandle([], DynamicCache(config=self.config))

    def forward(
        self, rows: Sequence[tuple[KVHandle, Sequence[int]]], n_out: Sequence[int]
    ) -> list[torch.Tensor]:
        out: list[torch.Tensor] = []
        with torch.no_grad():
            for (kv, new), n in zip(rows, n_out, strict=True):
                ids = torch.tensor([list(new)], dtype=torch.int64)
                res = self.model(input_ids=ids, cache=kv.state, use_cache=True, logits_to_keep=n)
                kv.tokens.extend(int(t) for t in new)
                out.append(res.logits[0, -n:, :].to(torch.float32))
        return out

    def fork_kv(self, kv: KVHandle) -> KVHandle:
        return KVHandle(list(kv.tokens), copy.deepcopy(kv.state))

    def truncate_kv(self, kv: KVHandle, length: int) -> None:
        drop = len(kv.tokens) - length
        if drop > 0:
            if length == 0:
                kv.state = self.new_kv().state
            else:
                kv.state.crop(-drop)
            del kv.tokens[length:]
