class Vec2:
    """A 2-D vector value. Implement me."""
