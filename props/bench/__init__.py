"""Benchmarks (``maskcert bench``): timings as ratios against the engines measured in the same run.

They live outside ``refdecoder`` because they read corpora from disk (STYLE §5: the reference is
sans-I/O)."""
