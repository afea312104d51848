"""The code of the reproducer scripts (:mod:`props.output.repro`), as modules that ruff and mypy check.

A script is ``common.py`` with one backend module's section in place of its ``# @backend`` line.
These modules are templates: nothing imports them at run time (``common`` imports cleanly, a backend
module needs its engine's package), and :func:`props.output.repro.render_reproducer` turns them into
the text of one standalone script with four markers:

* ``# @template-only begin`` ... ``# @template-only end``: lines that only the checkers need (this
  package's imports, ``from __future__``, stand-ins for what another module defines); dropped.
* ``NAME: type = placeholder  # @substitute NAME``: the finding's data; the line becomes
  ``NAME = json.loads('<ascii JSON>')``, so nothing from a finding is ever spliced into code.
* ``# @source MODULE:NAME,...``: the exact source of those top-level definitions of ``MODULE`` (an
  adapter), so that code an adapter and its reproducer share is written once (the template imports
  the same names in a template-only block, for the checkers).
* ``{field}`` in ``common``'s docstring: the script's docstring, filled with text from a safe
  character set.

The backend modules are named after the adapters in ``props/backends/`` whose behaviour they replay.
"""
