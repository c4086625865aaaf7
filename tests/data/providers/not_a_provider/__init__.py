"""A plugin folder that registers nothing and defines no ``MemoryProvider`` subclass."""

ANSWER = 42
