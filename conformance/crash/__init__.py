"""Crash states: the persistence models and the states a crash may leave of a recorded trace."""
