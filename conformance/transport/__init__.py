"""Reaching a backend: the Session and Backend interface, the in-process and JSON Lines
transports, and the pre-started next process of a command backend."""
