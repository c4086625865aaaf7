"""The deterministic scheduler, preemption-bounded exploration and repro files."""
