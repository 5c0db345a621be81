"""Agent runtime: tools, policies, the episode loop, batch rollouts, trajectory records."""
