"""The invariants (``docs/invariants.md``) as functions returning certified findings
(:mod:`props.checks.invariants`), as Hypothesis properties (:mod:`props.checks.properties`) and as a
differential state machine (:mod:`props.checks.stateful`); and what certification adds around them:
targeted instances (:mod:`~props.checks.targeted`), coverage-guided walks (:mod:`~props.checks.coverage`),
the engines' growth probes (:mod:`~props.checks.growth_probes`), findings grouped into defects and
minimized (:mod:`~props.checks.defects`, :mod:`~props.checks.minimize`), the reference's witnesses
(:mod:`~props.checks.witness`) and the Hypothesis profiles (:mod:`~props.checks.hypothesis_profiles`)."""
