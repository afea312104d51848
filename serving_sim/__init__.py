"""serving_sim: a simulated continuous-batching serving loop with switchable faults (DESIGN §5)."""

__all__: list[str] = []
