"""Property fuzzing of memory backends through the contract (issue in progress)."""
