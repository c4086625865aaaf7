"""Hermes support: release environments, the adapter and agent driver that run inside them,
and `memspec hermes`, `matrix` and `sweep`."""
