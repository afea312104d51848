"""Benchmarks (``maskcert bench``): timings as ratios against the engines measured in the same run.

Parts, each a module with ``run_*`` (returns a JSON-serializable result) and ``format_table``:
``masks`` (per-step masks along JSONSchemaBench walks), ``compile`` (compile and time to first mask
per schema, every installed backend through its adapter), ``sampler`` (the masked sampler's kernels)
and ``serving`` (the serving simulation's throughput per grammar backend). ``report`` runs them
(``run_part``) and gathers them into one report with a ratio column per engine (``gather``,
``format_markdown``): ``maskcert bench all`` and ``ci/bench.sh``.

They live outside ``refdecoder`` because they read corpora from disk (docs/style.md §5: the reference is
sans-I/O). Nothing is imported here: the parts pull in torch and the engines only when they run.
"""
