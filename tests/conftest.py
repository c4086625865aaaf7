"""Hypothesis profiles of the harness's own tests.

With ``CI`` set, Hypothesis loads its built-in deterministic ``ci`` profile (derandomised, no
example database). ``thorough`` is for bug hunting: ``pytest --hypothesis-profile thorough``.
"""

from hypothesis import settings

settings.register_profile("thorough", max_examples=2000, derandomize=False, deadline=None)
