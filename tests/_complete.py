"""Completion search over a Grammar (test support): the same search certification uses."""

from props.witness import breadth_first_completion, shortest_completion

__all__ = ["shortest_completion", "breadth_first_completion"]
