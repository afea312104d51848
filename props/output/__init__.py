"""What a run hands to people: ``report.json``/``.md``/``.html`` (:mod:`props.output.report`) and one
standalone reproducer script per finding (:mod:`props.output.repro`)."""
