"""Jepsen-style histories of concurrent sessions, the programs they run, and their checkers.

- :mod:`~memspec.conformance.history.history`: the history format and the spec model as a
  linearizability model;
- :mod:`~memspec.conformance.history.programs`: generated concurrent programs;
- :mod:`~memspec.conformance.history.analysis`, :mod:`~memspec.conformance.history.checkers`:
  the cheap checkers and :func:`~memspec.conformance.history.checkers.judge_history`;
- :mod:`~memspec.conformance.history.linearizability`,
  :mod:`~memspec.conformance.history.spec_search`: the linearizability search.

None of it needs Hypothesis: programs come from a seeded :class:`random.Random`.
"""
