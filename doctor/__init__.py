"""``memspec doctor``: check and safely repair a real memory directory (docs/doctor.md)."""
