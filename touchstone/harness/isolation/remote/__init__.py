"""Files copied into the sandboxes (standard library only): wire.py (protocol),
judge.py (pytest plugin + import hook), server.py (candidate side)."""
