"""Task making: proposers write candidate tasks, validation admits or rejects
them (adequacy, guards, change coverage, grading conditions, contamination,
leaks; a solver check that runs the agent), the task-set index records them,
held-out sets are kept apart, revocation withdraws a kept task, and a round's
sources draw from all proposers by quota. Above the agent and the audit; the
task format it writes is `touchstone.tasks`."""
