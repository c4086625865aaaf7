"""Worker processes that hold sessions (released together at a barrier), the reader process
that samples the files, and the worker side of a scheduled run."""
