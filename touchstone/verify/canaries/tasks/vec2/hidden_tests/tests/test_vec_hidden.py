from vec import Vec2


def test_eq_and_ne():
    assert Vec2(1, 2) == Vec2(1, 2)
    assert Vec2(1, 2) != Vec2(2, 1)
    assert not (Vec2(1, 2) == Vec2(2, 1))
    assert Vec2(1, 2) != (1, 2)


def test_add():
    assert Vec2(1, 2) + Vec2(3, 4) == Vec2(4, 6)
