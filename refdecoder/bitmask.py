"""Token masks as packed bits, the layout the reference and the engines share: token ``t`` is bit
``t & 31`` of 32-bit word ``t >> 5``. The public home of the packing helpers that adapters, the
serving simulation and benchmarks use."""

from ._tokens import num_words, pack_ids, unpack_mask

__all__ = ["num_words", "pack_ids", "unpack_mask"]
