"""The verdict package: everything from "an answer came back" to ``report.json``.

A check ends with a finding (:mod:`.findings`), whose verdict is data; :mod:`.blame` decides
which clause a wrong answer breaks, for the examples, the state machine, the history checkers
and the transport alike; :mod:`.records` keeps one record per check, :mod:`.standing` weighs a
clause on them for the table and for the level, :mod:`.summary` says what to fix first and
:mod:`.report` writes ``report.json``, ``report.md`` and ``report.html`` (:mod:`.report_html`, on
the page kit of :mod:`.webpage` and the readable differences of :mod:`.diffs`).
"""
