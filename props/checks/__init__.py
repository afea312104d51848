"""The invariants (``docs/invariants.md``) as functions returning certified findings
(:mod:`props.checks.invariants`), as Hypothesis properties (:mod:`props.checks.properties`) and as a
differential state machine (:mod:`props.checks.stateful`)."""
