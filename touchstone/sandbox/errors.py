"""The exceptions and the warning of the sandbox package."""


class SandboxError(RuntimeError):
    """A sandbox cannot be created or used as asked; the message names the problem."""


class WorkspaceRefused(SandboxError):
    """The harness will not walk, read or copy what the workspace holds (over its
    limits, a name or depth it cannot carry, a link out, a tree changing under
    it). In an agent's workspace that is the agent's doing: callers make it the
    run's outcome (a failed episode, a rejected trajectory, with this message),
    never an infrastructure failure."""


class SandboxWarning(UserWarning):
    """A sandbox started, but some of its limits do not hold here (which, and why, in the message)."""
