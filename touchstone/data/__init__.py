"""Training data: verified datasets (SFT, RL, preference) and turn-level credit."""
