from vec import Vec2


def test_add():
    assert Vec2(1, 2) + Vec2(3, 4) == Vec2(4, 6)
