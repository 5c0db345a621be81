from toolbox import arity, calc


def test_calc_small():
    assert calc("1 + 2") == 3


def test_arity_small():
    assert arity(lambda a, b: a) == 2
