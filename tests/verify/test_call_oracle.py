"""The recorded-call oracle end to end, through the verifier, in real sandboxes:
hidden tests run against the reference under the call recorder, their calls
are replayed on the candidate, outcomes compared out of process. Each task is
written here; each candidate is a trajectory that writes its files."""

import json
import textwrap
import uuid
from pathlib import Path

import pytest

from touchstone import paths
from touchstone.tasks.schema import load_task
from touchstone.verify.verifier import verify_trajectory


def make_task(
    root: Path, name: str, *, workspace: dict, hidden: dict, reference: dict, meta: dict | None = None,
    statement: str | None = None,
) -> Path:  # fmt: skip
    task = root / name
    for sub, files in (("workspace", workspace), ("hidden_tests", hidden), ("reference", reference)):
        for rel, text in files.items():
            (task / sub / rel).parent.mkdir(parents=True, exist_ok=True)
            (task / sub / rel).write_text(textwrap.dedent(text))
    spec = {
        "id": name,
        "statement": statement or f"Task {name}: see the workspace.",
        "timeout_s": 60,
        "source": {"meta": meta or {}},
    }
    (task / "task.json").write_text(json.dumps(spec))
    return task


def writes(files: dict) -> list[dict]:
    calls = [
        {
            "id": f"w{i}",
            "type": "function",
            "function": {
                "name": "write_file",
                "arguments": json.dumps({"path": rel, "content": textwrap.dedent(text)}),
            },
        }
        for i, (rel, text) in enumerate(files.items())
    ]
    return [{"role": "assistant", "content": "", "tool_calls": calls}]


def oracle_of(task_dir: Path, files: dict, backend: str = "bwrap"):
    report = verify_trajectory(load_task(task_dir), writes(files), replays=1, full=True, backend=backend)
    assert report.check("oracle") is not None, report.checks  # an infrastructure error stops before it
    return report.check("oracle")


# ------------------------------------------------------------- HumanEval style

HE_REFERENCE = {
    "solution.py": """
    def add_evens(xs):
        return sum(x for x in xs if x % 2 == 0)
"""
}
HE_HIDDEN = {
    "tests/test_hidden.py": """
    import solution


    def check(candidate):
        assert candidate([1, 2, 3, 4]) == 6
        assert candidate([7, 9]) == 0
        squares = [k * k for k in range(1, 6)]  # computed, not a literal
        assert candidate(squares) == 20


    def test_check():
        check(solution.add_evens)
"""
}


@pytest.fixture(scope="module")
def humaneval(tmp_path_factory) -> Path:
    return make_task(
        tmp_path_factory.mktemp("he"),
        "he-add-evens",
        reference=HE_REFERENCE,
        hidden=HE_HIDDEN,
        workspace={"solution.py": "def add_evens(xs):\n    raise NotImplementedError\n"},
    )


def test_check_candidate_lookup_table_is_rejected(humaneval):
    lookup = {
        "solution.py": """
        def add_evens(xs):
            return {(1, 2, 3, 4): 6, (7, 9): 0, (1, 4, 9, 16, 25): 20}.get(tuple(xs), 0)
    """
    }
    check = oracle_of(humaneval, lookup)
    assert check.status == "fail" and "generated input: solution.add_evens(" in check.evidence
    assert "3 calls recorded (0 not replayable)" in check.evidence


def test_check_candidate_honest_solution_is_accepted(humaneval):
    honest = {
        "solution.py": """
        def add_evens(numbers):
            total = 0
            for n in numbers:
                if not n % 2:
                    total += n
            return total
    """
    }
    check = oracle_of(humaneval, honest)
    assert check.status == "pass", check.evidence
    assert "3 calls recorded (0 not replayable)" in check.evidence and "mutated inputs" in check.evidence
    assert check.counts["recorded"] == 3 and check.counts["replayed"] > check.counts["mutated"] > 0


# --------------------------------------------------------- class-based task

BANK = """
    from collections import Counter
    from dataclasses import dataclass


    @dataclass
    class Txn:
        kind: str
        amount: int


    class Account:
        def __init__(self, owner, balance=0):
            self.owner = owner
            self.balance = balance
            self._log = []

        def deposit(self, amount):
            if amount <= 0:
                raise ValueError("amount must be positive")
            self.balance += amount
            self._log.append(Txn("dep", amount))
            return self.balance

        def withdraw(self, amount):
            if amount > self.balance:
                raise ValueError("insufficient funds")
            self.balance -= amount
            self._log.append(Txn("wd", amount))
            return self.balance

        @property
        def history(self):
            return list(self._log)

        def kinds(self):
            return Counter(t.kind for t in self._log)

        def amounts(self):
            for t in self._log:
                yield t.amount

        def __eq__(self, other):
            return isinstance(other, Account) and (self.owner, self.balance) == (other.owner, other.balance)

        def __add__(self, other):
            return Account(self.owner + "&" + other.owner, self.balance + other.balance)


    def _fee(amount, rate):
        return round(amount * rate)
"""
BANK_TESTS = {
    "tests/test_bank.py": """
    from collections import Counter

    import pytest

    import bank

    BASE = 10


    @pytest.fixture
    def account():
        acct = bank.Account("ann")
        for k in range(3):
            acct.deposit(BASE * (k + 1))
        return acct


    def test_sequence(account):
        assert account.withdraw(15) == 45
        with pytest.raises(ValueError):
            account.withdraw(1000)
        assert [t.kind for t in account.history] == ["dep", "dep", "dep", "wd"]
        assert account.kinds() == Counter({"dep": 3, "wd": 1})
        assert list(account.amounts()) == [10, 20, 30, 15]


    def test_operators():
        a, b = bank.Account("a", 5), bank.Account("b", 7)
        assert a + b == bank.Account("a&b", 12)


    def test_private_fee():
        assert bank._fee(BASE * 7 + 3, 0.1) == 7
"""
}
HONEST_BANK = """
    import collections
    import dataclasses


    @dataclasses.dataclass
    class Txn:
        kind: str
        amount: int


    def _fee(amount, rate):
        return round(rate * amount)


    class Account:
        def __init__(self, owner, balance=0):
            self.owner, self.balance, self._entries = owner, balance, []

        def _record(self, kind, amount):
            self._entries.append(Txn(kind, amount))
            return self.balance

        def deposit(self, amount):
            if not amount > 0:
                raise ValueError(amount)
            self.balance = self.balance + amount
            return self._record("dep", amount)

        def withdraw(self, amount):
            if self.balance < amount:
                raise ValueError(amount)
            self.balance = self.balance - amount
            return self._record("wd", amount)

        @property
        def history(self):
            return self._entries[:]

        def kinds(self):
            c = collections.Counter()
            for e in self._entries:
                c[e.kind] += 1
            return c

        def amounts(self):
            return (e.amount for e in self._entries)

        def __eq__(self, other):
            if not isinstance(other, Account):
                return NotImplemented
            return self.owner == other.owner and self.balance == other.balance

        def __radd__(self, other):
            return Account(other.owner + "&" + self.owner, other.balance + self.balance)

        def __add__(self, other):
            return Account.__radd__(other, self)
"""


@pytest.fixture(scope="module")
def bank_task(tmp_path_factory) -> Path:
    stub = "class Account:\n    pass\n"
    return make_task(
        tmp_path_factory.mktemp("bank"),
        "cls-bank",
        workspace={"bank.py": stub},
        hidden=BANK_TESTS,
        reference={"bank.py": BANK},
    )


def test_class_task_honest_solution_with_other_internals_is_accepted(bank_task):
    check = oracle_of(bank_task, {"bank.py": HONEST_BANK})
    assert check.status == "pass", check.evidence
    # fixture construction, 3 deposits, 2 withdrawals, property, Counter, generator,
    # 3 constructions, + and ==, the private helper
    assert "15 calls recorded (0 not replayable)" in check.evidence


@pytest.mark.parametrize(
    "old, new, what",
    [
        ("return Counter(t.kind for t in self._log)", "return Counter()", "method kinds("),  # empty Counter
        ("yield t.amount", "yield from ()", "method amounts("),  # empty generator
        ('raise ValueError("insufficient funds")', "return self.balance", "method withdraw("),  # no exception
        ("return round(amount * rate)", "return 7", "generated input: bank._fee("),  # the one known input
    ],
)
def test_class_task_wrong_results_are_rejected(bank_task, old, new, what):
    src = textwrap.dedent(BANK)
    assert old in src
    check = oracle_of(bank_task, {"bank.py": src.replace(old, new)})
    assert check.status == "fail" and what in check.evidence, check.evidence


def test_always_equal_result_is_rejected(bank_task):
    cheat = textwrap.dedent(HONEST_BANK).replace(
        "def _fee(amount, rate):\n    return round(rate * amount)",
        (
            "class _Any(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n\n\n"
            "def _fee(amount, rate):\n    return _Any(0)"
        ),
    )
    assert "_Any(0)" in cheat
    check = oracle_of(bank_task, {"bank.py": cheat})
    assert check.status == "fail" and "bank._fee(73, 0.1)" in check.evidence, check.evidence


# ------------------------------------------- iterables and performance contract

WINDOWS = {
    "win.py": """
    def windows(xs, k):
        '''Any iterable of the consecutive k-tuples of xs.'''
        for i in range(len(xs) - k + 1):
            yield tuple(xs[i:i + k])
"""
}
WINDOW_TESTS = {
    "tests/test_win.py": """
    import win


    def test_windows():
        assert list(win.windows([1, 2, 3, 4], 2)) == [(1, 2), (2, 3), (3, 4)]
        assert list(win.windows("abc", 3)) == [("a", "b", "c")]
"""
}
AS_LIST = {
    "win.py": """
    def windows(xs, k):
        return [tuple(xs[i:i + k]) for i in range(len(xs) - k + 1)]
"""
}


def test_list_for_a_generator_needs_the_iterable_contract(tmp_path):
    exact = make_task(tmp_path, "win-exact", workspace={"win.py": ""}, hidden=WINDOW_TESTS, reference=WINDOWS)
    check = oracle_of(exact, AS_LIST)
    assert check.status == "fail" and '"iterator"' in check.evidence
    anyit = make_task(
        tmp_path,
        "win-any",
        workspace={"win.py": ""},
        hidden=WINDOW_TESTS,
        reference=WINDOWS,
        meta={"oracle": {"iterables": "any"}},
    )
    assert oracle_of(anyit, AS_LIST).status == "pass"
    wrong = {"win.py": AS_LIST["win.py"].replace("+ 1)", ")")}  # misses the last window
    assert oracle_of(anyit, wrong).status == "fail"


def test_performance_contract(tmp_path):
    ref = {
        "fib.py": """
        def fib(n):
            a, b = 0, 1
            for _ in range(n):
                a, b = b, a + b
            return a
    """
    }
    slow = {
        "fib.py": """
        import time


        def fib(n):
            time.sleep(0.2)  # right answers, 100x slower than the reference
            a, b = 0, 1
            for _ in range(n):
                a, b = b, a + b
            return a
    """
    }
    tests = {"tests/test_fib.py": "import fib\n\n\ndef test_fib():\n    assert fib.fib(24) == 46368\n"}
    free = make_task(tmp_path, "fib-free", workspace={"fib.py": ""}, hidden=tests, reference=ref)
    assert oracle_of(free, slow).status == "pass"
    bound = make_task(
        tmp_path,
        "fib-bound",
        workspace={"fib.py": ""},
        hidden=tests,
        reference=ref,
        meta={"oracle": {"max_slowdown": 10}},
        statement="Return the n-th Fibonacci number in O(n) time.",
    )
    check = oracle_of(bound, slow)
    assert check.status == "fail" and "performance contract" in check.evidence, check.evidence
    assert oracle_of(bound, ref).status == "pass"
    # the same declaration on a statement that only says "fast": no bar a solver could know, never enforced
    unstated = make_task(tmp_path, "fib-unstated", workspace={"fib.py": ""}, hidden=tests, reference=ref,
                         meta={"oracle": {"max_slowdown": 10}}, statement="Return the n-th Fibonacci number, fast.")  # fmt: skip
    check = oracle_of(unstated, slow)
    assert check.status == "pass" and "max_slowdown 10 not applied" in check.evidence, check.evidence


def test_unreplayable_calls_are_counted_not_compared(tmp_path):
    ref = {
        "apply.py": "RATE = 1\n\n\ndef apply(f, xs):\n    return [f(x) for x in xs]\n\n\n"
        "def twice(x):\n    return 2 * x * RATE\n"
    }
    tests = {
        "tests/test_apply.py": """
        import apply


        def test_apply():
            assert apply.apply(lambda x: x + 1, [1, 2]) == [2, 3]  # a test-defined lambda
            assert apply.apply(apply.twice, [1, 2]) == [2, 4]  # a workspace function: by name


        def test_patched(monkeypatch):
            monkeypatch.setattr(apply, "RATE", 10)
            assert apply.twice(3) == 60  # replayed without the patch
    """
    }
    task = make_task(tmp_path, "apply", workspace={"apply.py": ""}, hidden=tests, reference=ref)
    check = oracle_of(task, ref)
    assert check.status == "pass", check.evidence
    assert "3 calls recorded (1 not replayable: 1 argument of type " in check.evidence
    assert check.counts["context_dependent"] == 1, check.evidence


def test_decorated_functions_closures_and_module_level_objects_are_replayed(tmp_path):
    ref = {
        "deco.py": """
        import functools


        def logged(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                return fn(*args, **kwargs)
            return wrapper


        @logged
        def double(x):
            return 2 * x


        @logged
        def square(x):
            return x * x


        class Scale:
            def __init__(self, k):
                self._k = k

            def __call__(self, x):
                return self._k * x


        triple = Scale(3)


        def make_scaler(k):
            def scale(x):
                return k * x
            return scale
    """
    }
    tests = {
        "tests/test_deco.py": """
        import deco


        def test_all():
            assert deco.double(4) == 8
            assert deco.square(3) == 9
            assert deco.triple(2) == 6
            assert deco.make_scaler(3)(4) == 12  # a closure: replayed by calling the factory's result
    """
    }
    task = make_task(tmp_path, "deco", workspace={"deco.py": ""}, hidden=tests, reference=ref)
    check = oracle_of(task, ref)
    assert check.status == "pass" and "5 calls recorded (0 not replayable)" in check.evidence, check.evidence
    source = textwrap.dedent(ref["deco.py"])
    for old, new, what in [
        ("return x * x", "return {3: 9}.get(x, 0)", "generated input: deco.square("),
        ("return k * x", "return 12", "generated input: op __call__(<result of call #"),
    ]:
        check = oracle_of(task, {"deco.py": source.replace(old, new)})
        assert check.status == "fail" and what in check.evidence, check.evidence


def test_tests_that_crash_under_the_recorder_leave_no_oracle_visibly(tmp_path):
    """Such tests do not run isolated either (the reference's run ends early), so the run is in
    process and, with no oracle behind it, inconclusive: an in-process run is never a pass by itself."""
    tests = {
        "tests/test_exit.py": """
        import os

        import win


        def test_windows():
            assert list(win.windows([1, 2], 1)) == [(1,), (2,)]
            os._exit(0)  # ends pytest (and the recording) before it finishes
    """
    }
    task = make_task(tmp_path, "win-exit", workspace={"win.py": ""}, hidden=tests, reference=WINDOWS)
    check = oracle_of(task, WINDOWS)
    assert check.status == "error" and "never a pass by itself" in check.evidence, check.evidence
    assert "no oracle: the hidden tests crashed" in check.evidence


def test_invalid_oracle_contract_is_an_error(tmp_path):
    task = make_task(
        tmp_path,
        "bad-contract",
        workspace={"win.py": ""},
        hidden=WINDOW_TESTS,
        reference=WINDOWS,
        meta={"oracle": {"iterables": "some"}},
    )
    check = oracle_of(task, WINDOWS)
    assert check.status == "error" and "source.meta.oracle" in check.evidence


@pytest.mark.docker
def test_check_candidate_lookup_table_is_rejected_on_docker(humaneval):
    lookup = {"solution.py": "def add_evens(xs):\n    return {(1, 2, 3, 4): 6, (7, 9): 0}.get(tuple(xs), 20)\n"}
    check = oracle_of(humaneval, lookup, backend="docker")
    assert check.status == "fail" and "3 calls recorded (0 not replayable)" in check.evidence
    assert oracle_of(humaneval, HE_REFERENCE, backend="docker").status == "pass"


# ------------------------------------------- the reference's replay, cached

FROM_CACHE = "the reference's replay from the cache"
ADD = "def add(a, b):\n    return a + b\n"


def _varying_task(root: Path, body: str, tests: str) -> tuple[Path, dict]:
    """A one-function task whose reference is `body`, with a fresh nonce so no
    earlier run of this test left its replay in the cache."""
    ref = {"vary.py": f"# {uuid.uuid4().hex}\nimport datetime\nimport os\nimport random\n\n\n{body}\n\n{ADD}"}
    hidden = {"tests/test_vary.py": f"import vary\n\n\n{tests}\n\ndef test_add():\n    assert vary.add(2, 3) == 5\n"}
    return make_task(root, "vary", workspace={"vary.py": ""}, hidden=hidden, reference=ref), ref


@pytest.mark.parametrize(
    "body, tests, cached",
    [
        # seeded per case by the replay runner: the same under seed 0 in any process, order or clock
        (
            "def pick(xs):\n    return random.choice(xs)\n",
            "def test_pick():\n    assert vary.pick([1, 2, 3]) in (1, 2, 3)\n",
            True,
        ),
        ("def neg(a):\n    return -a\n", "def test_neg():\n    assert vary.neg(2) == -2\n", True),
        # the clock at the resolution of a day: two runs a second apart agree, the shifted clock does not
        (
            "def stamp(x):\n    return f'{x}-{datetime.date.today().isoformat()}'\n",
            "def test_stamp():\n    assert vary.stamp('a').startswith('a-')\n",
            False,
        ),
        (
            "def year():\n    return datetime.datetime.now().year\n",
            "def test_year():\n    assert vary.year() > 2000\n",
            False,
        ),
        # unseeded randomness: differs from process to process
        (
            "def token():\n    return os.urandom(4).hex()\n",
            "def test_token():\n    assert len(vary.token()) == 8\n",
            False,
        ),
    ],
)
def test_the_reference_replay_is_cached_only_once_shown_deterministic(tmp_path, body, tests, cached):
    task, ref = _varying_task(tmp_path, body, tests)
    first = oracle_of(task, ref)
    assert first.status == "pass" and FROM_CACHE not in first.evidence, first.evidence
    second = oracle_of(task, ref)
    assert second.status == "pass", second.evidence
    assert (FROM_CACHE in second.evidence) is cached, second.evidence


def test_a_rejection_never_rests_on_the_cached_replay(tmp_path):
    body = "def scale(x):\n    return 3 * x\n"
    task, ref = _varying_task(tmp_path, body, "def test_scale():\n    assert vary.scale(2) == 6\n")
    oracle_of(task, ref)  # fills the cache
    wrong = {"vary.py": body.replace("3 * x", "6 if x == 2 else 0")}
    check = oracle_of(task, wrong)
    assert check.status == "fail" and FROM_CACHE not in check.evidence, check.evidence
    # a cache entry that holds the reference to a wrong answer: the honest candidate still passes, and the
    # entry is dropped
    (entry,) = [p for p in (paths.cache() / "oracle").glob("reference-*.json") if p.stat().st_mtime >= _started(task)]
    data = json.loads(entry.read_text())
    for run in data["runs"]:
        for steps in run.values():
            for step in steps.values():
                if step["out"][0] == "ok":
                    step["out"][1] = ["int", 12345] if step["out"][1] != ["int", 12345] else ["int", 1]
    entry.write_text(json.dumps(data))
    check = oracle_of(task, ref)
    assert check.status == "pass" and "disagreed with a fresh one: dropped" in check.evidence, check.evidence
    assert not entry.exists()


def _started(task: Path) -> float:
    return (task / "task.json").stat().st_mtime


# ------------------------------------------------ mutation tasks from the seeds


@pytest.mark.slow
def test_mutation_tasks_reference_fix_accepted_mutant_rejected(tmp_path):
    from touchstone.taskmaking.proposers.mutation import propose_mutation
    from touchstone.tasks.schema import load_task_set

    propose_mutation(tmp_path / "tasks", n=2, workers=2)
    tasks = load_task_set(tmp_path / "tasks")
    assert tasks
    for task in tasks:
        fix = {p.relative_to(task.reference_dir).as_posix(): p.read_text() for p in task.reference_dir.rglob("*.py")}
        check = oracle_of(task.dir, fix)
        assert check.status == "pass", (task.id, check.evidence)
        report = verify_trajectory(task, [], replays=1, full=True, backend="bwrap")  # the unfixed mutant
        assert report.check("oracle").status == "fail", (task.id, report.check("oracle").evidence)


@pytest.mark.parametrize("name", ["combi", "libfix", "mutlib", "vec2"])
def test_each_canary_reference_agrees_with_itself(name):
    """Tasks written for other checks: the reference replayed as a candidate
    passes (no false rejection from the recorder, the serializer or timing)
    and the oracle covers calls from their tests."""
    from touchstone.verify.canaries import TASKS

    task = load_task(TASKS / name)
    fix = {p.relative_to(task.reference_dir).as_posix(): p.read_text() for p in task.reference_dir.rglob("*.py")}
    check = oracle_of(task.dir, fix)
    assert check.status == "pass" and check.counts["replayed"] > 0, check.evidence


def test_an_in_process_run_whose_tests_read_output_or_files_is_not_oracle_guarded(tmp_path):
    """The recorded-call oracle compares what calls return; a test that asserts
    on captured output or a file under its tmp_path reads what no replayed call
    returns, so an in-process run of it keeps the weakest guard (the call
    recorder counts it `unobserved`), while a test of values alone earns
    `oracle`."""
    ref = {"shout.py": "def shout(s):\n    print(s.upper())\n    return len(s)\n"}
    reads = {
        "tests/test_shout.py": """
        from shout import shout


        def test_shout(capsys):
            assert shout("hi") == 2
            assert capsys.readouterr().out == "HI\\n"
        """
    }
    redirected = {
        "tests/test_shout.py": """
        import contextlib, io
        from shout import shout


        def test_shout():
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                assert shout("hi") == 2
            assert buf.getvalue() == "HI\\n"
        """
    }
    values = {"tests/test_shout.py": "from shout import shout\n\n\ndef test_shout():\n    assert shout('hi') == 2\n"}
    guards = []
    for name, tests in (("reads-output", reads), ("redirected", redirected), ("values-only", values)):
        task = load_task(make_task(tmp_path, name, workspace={"shout.py": ""}, hidden=tests, reference=ref))
        report = verify_trajectory(task, writes(ref), replays=1, backend="bwrap", isolated=False)
        assert report.verdict == "accept", report.reasons
        guards.append((report.guard, report.check("oracle").counts.get("unobserved")))
    assert guards == [("in_process", 1), ("in_process", 1), ("oracle", 0)], guards
