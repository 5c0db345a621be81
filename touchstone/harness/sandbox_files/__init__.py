"""Files the verifier copies, read-only, into a grading sandbox: the pytest
plugin that records per-test results and the oracle runner. They run inside
the sandbox's own interpreter, so they use the standard library (and pytest)
only and never import touchstone."""
