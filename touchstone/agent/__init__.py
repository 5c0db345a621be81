"""Agent runtime: policies, the episode loop, batch rollouts, the teacher, serving and
importers of outside trajectories (the tools and the trajectory record: `touchstone.episode`)."""
