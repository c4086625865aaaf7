"""The certification suite collected by ``pytest --pyargs memspec.conformance.suite``."""
