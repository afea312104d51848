"""refdecoder: the exact reference for structured-generation token masks.

Specs (``JsonSchema``, ``Regex``, ``Gbnf``, ``Choice``, ``Lark``, ``StructuralTag``) compile to a :class:`Grammar` over bytes; a
:class:`TokenGrammar` lifts it to a vocabulary (token masks), and :class:`Matcher` is one sequence's
handle. Nothing here reads files or prints (docs/style.md §5).
"""

from ._budget import TokenDistances, budget_distances
from ._compile import compile, compile_choice, compile_gbnf, compile_json_schema, compile_regex
from ._input import read_spec_json, read_spec_text
from ._limits import parse_limit
from ._matcher import Accepted, Matcher, Outcome, Rejected
from ._special import encode as special_token_bytes
from ._special import render as render_text
from ._special import split as split_special_tokens
from ._tokens import TERMINATED, SpecialView, TokenGrammar, VocabularyLike, token_trie
from .errors import (
    LimitExceeded,
    LimitName,
    MaskcertError,
    NoValidToken,
    SpecError,
    SpecFileError,
    StateError,
    TokenBudgetError,
    Unsupported,
    VocabularyError,
)
from .grammar import (
    GBNF_DIALECTS,
    Choice,
    Gbnf,
    Grammar,
    JsonProfile,
    JsonSchema,
    Lark,
    Limits,
    Regex,
    Spec,
    State,
    StructuralTag,
)

__all__ = [
    "Accepted",
    "Matcher",
    "Outcome",
    "Rejected",
    "TERMINATED",
    "TokenGrammar",
    "TokenDistances",
    "budget_distances",
    "SpecialView",
    "VocabularyLike",
    "token_trie",
    "compile",
    "compile_choice",
    "compile_gbnf",
    "compile_json_schema",
    "compile_regex",
    "parse_limit",
    "read_spec_json",
    "read_spec_text",
    "special_token_bytes",
    "render_text",
    "split_special_tokens",
    "Choice",
    "Gbnf",
    "GBNF_DIALECTS",
    "Grammar",
    "JsonProfile",
    "JsonSchema",
    "Lark",
    "StructuralTag",
    "Limits",
    "Regex",
    "Spec",
    "State",
    "LimitExceeded",
    "LimitName",
    "MaskcertError",
    "NoValidToken",
    "TokenBudgetError",
    "SpecError",
    "SpecFileError",
    "StateError",
    "Unsupported",
    "VocabularyError",
]
