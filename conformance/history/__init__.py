"""Jepsen-style histories of concurrent sessions, the programs they run, and their checkers: the
format and the spec model as a linearizability model (``history``), generated programs
(``programs``), the cheap checkers and :func:`~memspec.conformance.history.checkers.judge_history`
(``analysis``, ``checkers``), and the linearizability search (``linearizability``, ``spec_search``).
None of it needs Hypothesis."""
