"""One error hierarchy for all of maskcert (docs/style.md §6).

Every error derives from :class:`MaskcertError` and from the builtin it most resembles, carries its
data as fields, and says in its message what was wrong and how to fix it.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "LimitName",
    "MaskcertError",
    "SpecError",
    "Unsupported",
    "LimitExceeded",
    "InputError",
    "SpecFileError",
    "VocabularyError",
    "NoValidToken",
    "StateError",
    "TokenBudgetError",
]


#: The name of a :class:`~refdecoder.Limits` field, one per field (``tests/test_architecture.py`` checks
#: that they agree): what :attr:`LimitExceeded.limit` names and ``--limit NAME=VALUE`` raises. Here,
#: not in ``_limits``, so that this module stays the package's leaf.
LimitName = Literal[
    "schema_bytes",
    "nesting_depth",
    "enum_size",
    "automaton_states",
    "dfa_states",
    "nfa_states",
    "parser_stacks",
    "compile_seconds",
    "object_properties",
    "alternatives",
    "key_rules",
    "repeat_bound",
    "compile_fuel",
    "byte_dfa_states",
    "repetition_count",
    "rewrite_symbols",
    "lookahead_steps",
    "unevaluated_cases",
    "unevaluated_alternatives",
    "number_constant_bits",
    "number_not_multiple_of",
    "number_predicate_conjunctions",
    "unique_items_number_values",
    "unique_items_number_points",
    "object_exists_per_key",
    "object_search_states",
]


class MaskcertError(Exception):
    """Root of every error maskcert raises on purpose."""


class SpecError(MaskcertError, ValueError):
    """A spec (schema, regex, grammar, choice list) is malformed.

    ``where`` is the place in the spec (a JSON pointer, a byte offset, a rule name), ``expected`` says
    what would have been valid there.
    """

    def __init__(self, what: str, where: str, expected: str) -> None:
        self.what = what
        self.where = where
        self.expected = expected
        super().__init__(f"{what} at {where}: expected {expected}")


class Unsupported(MaskcertError, ValueError):
    """The reference cannot decide this construct exactly, so it refuses it instead of approximating.

    ``where`` is the construct's place in the spec (a JSON pointer, a rule name; ``""`` for the root).
    """

    def __init__(self, keyword: str, where: str, reason: str) -> None:
        self.keyword = keyword
        self.where = where
        self.reason = reason
        super().__init__(f"unsupported {keyword!r} at {where or '/'}: {reason}")


class LimitExceeded(MaskcertError, ValueError):
    """A resource limit was hit; raise the limit (see ``Limits``) or simplify the spec.

    ``where`` is the place in the spec where it was hit (a JSON pointer, or words such as ``"pattern"``;
    ``""`` when not known).
    """

    def __init__(self, limit: LimitName, value: Any, bound: Any = None, where: str = "") -> None:
        self.limit: LimitName = limit
        self.value = value
        self.bound = bound
        self.where = where
        at = f" at {where}" if where else ""
        of = f" (limit {bound})" if bound is not None else ""
        super().__init__(f"limit {limit!r} exceeded{at}: {value}{of}")


class InputError(MaskcertError, ValueError):
    """An input (a file, a name, a record) that is not what was expected: ``path`` names the input
    itself (a file's path, or what the input is), ``expected`` says what would have been valid,
    ``detail`` what was found instead. A place *inside* the input is ``where`` on the spec errors
    above, and ``line``/``column``/``offset`` on :class:`SpecFileError`."""

    def __init__(self, path: str, expected: str, detail: str = "") -> None:
        self.path = path
        self.expected = expected
        self.detail = detail
        tail = f" ({detail})" if detail else ""
        super().__init__(f"{path}: expected {expected}{tail}")


class SpecFileError(InputError):
    """A spec file (schema, grammar, regex list) that cannot be read as one: not UTF-8, not JSON, too
    large or nested too deep. ``path`` names the file; ``line``/``column`` (1-based) and ``offset``
    (bytes) say where, when known; ``limit`` names the :class:`~refdecoder.Limits` field to raise when
    the file is merely too large or too deep."""

    def __init__(
        self,
        path: str,
        expected: str,
        detail: str = "",
        *,
        line: int | None = None,
        column: int | None = None,
        offset: int | None = None,
        limit: str | None = None,
    ) -> None:
        self.line = line
        self.column = column
        self.offset = offset
        self.limit = limit
        super().__init__(path, expected, detail)


class VocabularyError(InputError):
    """A tokenizer file is unknown or malformed."""


class NoValidToken(MaskcertError, RuntimeError):
    """The grammar allows no token in a row that must produce one: never a silent draw."""

    def __init__(self, row: int, step: int | None = None, state_id: Any = None) -> None:
        self.row = row
        self.step = step
        self.state_id = state_id
        super().__init__(
            f"NO_VALID_TOKEN: row {row} at step {step} (state {state_id!r}) has no grammar-allowed token"
        )


class StateError(MaskcertError, ValueError):
    """An operation was asked of a matcher or state that cannot take it (e.g. rollback too far)."""


class TokenBudgetError(MaskcertError, ValueError):
    """A token budget (``max_new_tokens``, a request's ``max_tokens``) that the spec cannot be finished
    within, or that could not be decided within the search bound. ``budget`` is the number of tokens
    allowed (EOS included), ``needed`` the fewest the spec's shortest output takes when known (else
    ``None``), ``where`` what was being checked."""

    def __init__(self, budget: int, needed: int | None, where: str, detail: str = "") -> None:
        self.budget = budget
        self.needed = needed
        self.where = where
        need = f"needs at least {needed} tokens (EOS included)" if needed is not None else detail
        super().__init__(f"token budget {budget} at {where}: {need}")
