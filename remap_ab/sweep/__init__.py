"""The sweep: which points run, the run folder, progress, the summary, JUnit, and the orchestration (run)."""
