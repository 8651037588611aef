"""The Triton interpreter on the CPU: a launch's programs run together, and program schedules."""
