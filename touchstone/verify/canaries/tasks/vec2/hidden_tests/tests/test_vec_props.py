from vec import Vec2


def test_hash_dedupes():
    assert len({Vec2(1, 2), Vec2(1, 2), Vec2(0, 0)}) == 2


def test_repr():
    assert repr(Vec2(1, 2)) == "Vec2(1, 2)"
