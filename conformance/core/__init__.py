"""The check machinery every check shares: registry, findings, records, budgets, profiles,
options, the spec-example runner, clause verdicts, cache locations and results pages."""
