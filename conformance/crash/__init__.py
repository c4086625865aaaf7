"""Crash states: what a persistence model allows after a crash during a mutation.

- :mod:`~memspec.conformance.crash.fstrace`: file-system calls recorded by interposition or
  ``strace``, as logical operations;
- :mod:`~memspec.conformance.crash.persistence`: the persistence models and the crash states
  each allows.
"""
