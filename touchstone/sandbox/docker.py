"""The Docker backend (being written)."""


def docker_unavailable_reason() -> str | None:
    return "the docker backend is not implemented yet"
