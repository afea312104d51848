"""maskcert, the application: certify a backend (:func:`certify`), fuzz campaigns
(:mod:`maskcert.fuzz`), benchmarks (:mod:`maskcert.bench`), the command line (:mod:`maskcert.cli`) and
the pytest plugin. The checking library it drives is :mod:`props`; the reference is :mod:`refdecoder`.

``import maskcert`` stays cheap: :func:`certify`, its options (:class:`CertifyConfig`) and its
:class:`Report` are imported on first use, and typed for checkers through the ``TYPE_CHECKING``
imports below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from maskcert.certification import CertifyConfig, Report, certify

__all__ = ["certify", "CertifyConfig", "Report"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from maskcert import certification

        value = getattr(certification, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'maskcert' has no attribute {name!r}")
