"""The exception and the warning of the sandbox package."""


class SandboxError(RuntimeError):
    """A sandbox cannot be created or used as asked; the message names the problem."""


class SandboxWarning(UserWarning):
    """A sandbox started, but some of its limits do not hold here (which, and why, in the message)."""
