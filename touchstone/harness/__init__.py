"""Test-running code shared by task validation and verification."""
