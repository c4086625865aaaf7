"""The deterministic scheduler, chosen interleavings and repro files.

- :mod:`~memspec.conformance.schedule.schedule`: one file-system call at a time, granted to the
  session a chooser names;
- :mod:`~memspec.conformance.schedule.exploration`: programs run under a schedule, judged,
  explored up to a bound of preemptions and rendered as a timeline;
- :mod:`~memspec.conformance.schedule.repro`: repro files and ``memspec repro``.
"""
