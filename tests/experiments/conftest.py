from tests.training.conftest import tiny_model  # noqa: F401 (the shared tiny base model)
