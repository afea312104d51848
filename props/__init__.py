"""props: maskcert's invariants, backend adapters and certification (DESIGN §4, §6)."""

__all__: list[str] = []
