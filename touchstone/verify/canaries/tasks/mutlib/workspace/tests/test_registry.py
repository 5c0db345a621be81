import pytest
from registry import value_of


@pytest.mark.parametrize("name, want", [("alpha", 1), ("beta", 2)])
def test_value_of(name, want):
    assert value_of(name) == want


def test_missing():
    with pytest.raises(ModuleNotFoundError):
        value_of("gamma")
