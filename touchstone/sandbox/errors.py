"""The one exception type of the sandbox package."""


class SandboxError(RuntimeError):
    """A sandbox cannot be created or used as asked; the message names the problem."""
