def check(got, want):
    assert got == want, f"got {got!r}, want {want!r}"
