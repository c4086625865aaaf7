"""What can be done to a backend's file-system calls: record them, fail one, delay one, stop or
kill at one, by Python interposition inside a worker or by strace for any process."""
