"""Isolated test runs: the hidden tests run in a judge process that holds no
candidate code; the workspace's modules are proxies to the candidate's process
in another sandbox. See docs/VERIFIER.md ("Isolation")."""
