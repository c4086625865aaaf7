"""Worker processes, file-system interposition and turn-taking for the checks.

- :mod:`~memspec.conformance.processes.workers`: sessions in worker processes, released together
  at a barrier, and their operations as history records;
- :mod:`~memspec.conformance.processes.interpose`: the file-system calls of a Python backend,
  traced, failed or delayed inside a worker only;
- :mod:`~memspec.conformance.processes.turns`: the worker side of a scheduled run, each call
  waiting for its turn;
- :mod:`~memspec.conformance.processes.reader`: a process that samples the files while sessions
  write them.

This layer imports the conformance core and :mod:`memspec.spec` only.
"""
