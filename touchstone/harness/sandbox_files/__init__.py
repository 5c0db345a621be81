"""Files the verifier copies, read-only, into a grading sandbox: the pytest
plugin that records per-test results, and the oracle's call recorder (a pytest
plugin run over the reference), replay runner and value codec. They run inside
the sandbox's own interpreter, so they use the standard library (and pytest)
only and never import touchstone (`codec` is also imported by the verifier)."""
