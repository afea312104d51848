"""The sampler against its exact model (``--target sampler``, also part of ``reference``).

* ``apply_token_bitmask`` must equal ``torch.where(allowed, logits, -inf)`` bit for bit, with
  ``allowed`` built the obvious way from xgrammar's layout (bit ``i % 32`` of word ``i // 32``).
* ``sample`` must draw an allowed token whose logit is not -inf/NaN, the first maximum when greedy,
  and report ``NoValidToken`` exactly when no such token exists.

A difference is a finding with backend ``reference`` on a pseudo-spec naming the function and the
dtype (``SpecRef(SpecKind.CHOICE, ["sampler:apply_token_bitmask", "float32"])``): the sampler has no
grammar, and the certificate holds the case (row, token, words, logits).
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from maskcert.fuzz._property import Property, TargetContext, cover
from props.contract.findings import Finding, FindingFailure, Invariant, SpecKind, SpecRef

__all__ = ["sampler_properties"]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
_SPECIALS = [float("nan"), float("inf"), float("-inf"), -0.0]


@st.composite
def _masked_batch(draw: st.DrawFn, *, min_vocab: int = 0) -> tuple[Any, Any]:
    import torch

    batch = draw(st.integers(1, 3), label="batch")
    vocab = draw(st.integers(min_vocab, 130), label="vocab")
    need = -(-vocab // 32)
    words = draw(st.one_of(st.just(need), st.integers(0, need + 2)), label="words")
    word = st.one_of(st.sampled_from([0, -1, INT32_MIN, 1, INT32_MAX]), st.integers(INT32_MIN, INT32_MAX))
    bitmask = torch.tensor([[draw(word) for _ in range(words)] for _ in range(batch)], dtype=torch.int32)
    bitmask = bitmask.reshape(batch, words)
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**32 - 1), label="logits seed"))
    dtype = draw(
        st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.float64]), label="dtype"
    )
    logits = (torch.randn(batch, vocab, generator=gen) * 4).to(dtype)
    if vocab:
        for r, i, v in draw(
            st.lists(
                st.tuples(st.integers(0, batch - 1), st.integers(0, vocab - 1), st.sampled_from(_SPECIALS)),
                max_size=5,
            )
        ):
            logits[r, i] = v
    return logits, bitmask


def _allowed(bitmask: Any, vocab: int) -> list[list[bool]]:
    """Token i is allowed iff i < 32 * W and bit i % 32 of word i // 32 is set."""
    return [
        [i < 32 * len(words) and (words[i // 32] >> (i % 32)) & 1 == 1 for i in range(vocab)]
        for words in bitmask.tolist()
    ]


def _finding(
    fn: str,
    dtype: str,
    invariant: Invariant,
    token: int | None,
    got: str,
    want: str,
    message: str,
    certificate: dict[str, Any],
) -> Finding:
    return Finding(
        invariant=invariant,
        backend="reference",
        backend_version="0.1.0",
        spec=SpecRef(SpecKind.CHOICE, [f"sampler:{fn}", dtype], name=f"sampler:{fn}", corpus="sampler"),
        tokenizer="",
        tokenizer_fingerprint="",
        token_id=token,
        backend_verdict=got,
        reference_verdict=want,
        message=message,
        certificate=certificate,
        walk="sampler",
    )


def _apply_property() -> Property:
    @given(case=_masked_batch())
    def apply_equals_where(case: tuple[Any, Any]) -> None:
        import torch

        from refdecoder.sampler import INT_TWIN, apply_token_bitmask

        logits, bitmask = case
        vocab = logits.shape[1]
        allowed = torch.tensor(_allowed(bitmask, vocab), dtype=torch.bool).reshape(logits.shape)
        want = torch.where(allowed, logits, torch.tensor(float("-inf"), dtype=logits.dtype))
        got = logits.clone()
        apply_token_bitmask(got, bitmask)
        cover("invariant", "soundness")
        cover("invariant", "completeness_token")
        twin = INT_TWIN[logits.dtype]
        diff = (got.view(twin) != want.view(twin)).nonzero().tolist()
        if diff:
            r, i = diff[0]
            ok = bool(allowed[r, i])
            raise FindingFailure(
                [
                    _finding(
                        "apply_token_bitmask",
                        str(logits.dtype).removeprefix("torch."),
                        Invariant.COMPLETENESS_TOKEN if ok else Invariant.SOUNDNESS,
                        i,
                        f"logit {float(got[r, i])!r}",
                        f"logit {float(want[r, i])!r}",
                        f"apply_token_bitmask differs from torch.where(mask, logits, -inf) on an "
                        f"{'allowed' if ok else 'masked'} token",
                        {
                            "row": r,
                            "vocab": vocab,
                            "words": bitmask[r].tolist(),
                            "logit": float(logits[r, i]),
                            "differences": len(diff),
                        },
                    )
                ]
            )

    return Property("sampler/apply_token_bitmask", apply_equals_where)


def _sample_property() -> Property:
    params: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
        {
            "temperature": st.sampled_from([0.0, 0.7, 1.0]),
            "top_k": st.sampled_from([None, 1, 5]),
            "top_p": st.sampled_from([1.0, 0.9, 0.3]),
            "min_p": st.sampled_from([0.0, 0.05]),
            "seed": st.integers(0, 2**63),
        }
    )

    @given(case=_masked_batch(min_vocab=1), p=params)
    def sample_draws_allowed(case: tuple[Any, Any], p: dict[str, Any]) -> None:
        import torch

        from refdecoder.errors import NoValidToken
        from refdecoder.sampler import SamplingParams, sample

        logits, bitmask = case
        vocab = logits.shape[1]
        allowed = _allowed(bitmask, vocab)
        params_ = SamplingParams(**p)
        result = sample(logits, bitmask, params_, step=0, raise_on_error=False)
        dtype = str(logits.dtype).removeprefix("torch.")
        cover("invariant", "liveness")
        for r, outcome in enumerate(result.outcomes()):
            row = logits[r].to(torch.float64).tolist()
            usable = [
                i for i in range(vocab) if allowed[r][i] and not math.isnan(row[i]) and row[i] != -math.inf
            ]
            cert = {"row": r, "vocab": vocab, "words": bitmask[r].tolist(), "params": p}
            if isinstance(outcome, NoValidToken):
                if usable:
                    raise FindingFailure(
                        [
                            _finding(
                                "sample",
                                dtype,
                                Invariant.LIVENESS,
                                None,
                                "NoValidToken",
                                f"{len(usable)} usable tokens",
                                "sample reports no valid token while allowed tokens have usable logits",
                                cert,
                            )
                        ]
                    )
                continue
            t = int(outcome)
            if t not in usable:
                raise FindingFailure(
                    [
                        _finding(
                            "sample",
                            dtype,
                            Invariant.SOUNDNESS,
                            t,
                            "drawn",
                            "masked",
                            "sample drew a masked token or one with logit -inf/NaN",
                            cert,
                        )
                    ]
                )
            if params_.greedy:
                best = max(row[i] for i in usable)
                first = next(i for i in usable if row[i] == best)
                if t != first:
                    raise FindingFailure(
                        [
                            _finding(
                                "sample",
                                dtype,
                                Invariant.DETERMINISM,
                                t,
                                "drawn",
                                f"argmax {first}",
                                "greedy sample is not the first allowed maximum",
                                cert,
                            )
                        ]
                    )

    return Property("sampler/sample", sample_draws_allowed)


def sampler_properties(ctx: TargetContext) -> list[Property]:
    return [_apply_property(), _sample_property()]
