"""Times calc() over a few expressions (the project's own benchmark harness)."""

import time

EXPRESSIONS = ["1 + 2 * 3", "(4 - 1) / 3", "-(2 * 2) + 10", "2.5 * 4"]


def main(rounds=200):
    from toolbox import calc

    t0 = time.perf_counter()
    for _ in range(rounds):
        for e in EXPRESSIONS:
            calc(e)
    print(f"{rounds * len(EXPRESSIONS)} calls in {time.perf_counter() - t0:.3f}s")


if __name__ == "__main__":
    import sys

    sys.path.insert(0, ".")
    main()
