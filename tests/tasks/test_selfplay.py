"""Self-play proposals and the round's source mix, on recorded model outputs
replayed by the `replay:` policy (no live model here)."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

import pytest

from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.policies import make_policy
from touchstone.taskmaking.index import read_index, row_for, write_index
from touchstone.taskmaking.proposers.common import write_solution_task
from touchstone.taskmaking.proposers.selfplay import SelfPlayConfig, propose_self, read_proposals
from touchstone.tasks.schema import EntryPoint, Task, TaskSource, load_task_set
from touchstone.taskmaking.sources import (
    SOURCES_FILE,
    RoundSources,
    SourceMix,
    draw_imported,
    propose_round,
)
from touchstone.taskmaking.validate import Validation, ValidationConfig
from touchstone.rounds import earlier_round_keys

OUTPUTS = json.loads((Path(__file__).parent / "fixtures" / "llm_outputs.json").read_text())
BY_LABEL = {o["label"]: o["output"] for o in OUTPUTS}
WELL_FORMED = json.loads(BY_LABEL["well_formed"].split("```json", 1)[1].split("```", 1)[0])

PROBLEMS = {  # entry point -> (statement, reference, test body)
    "clamp": ("Return x limited to the closed interval [lo, hi].", "return max(lo, min(x, hi))", "clamp(5, 0, 3) == 3"),
    "evens": ("Return the even numbers of xs in their original order.", "return [x for x in xs if x % 2 == 0]",
              "evens([1, 2, 4]) == [2, 4]"),
    "squash": ("Collapse each run of spaces in s into a single space.", "return ' '.join(s.split(' '))",
               "squash('a  b') == 'a b'"),
}  # fmt: skip
ARGS = {"clamp": "x, lo, hi", "evens": "xs", "squash": "s"}


def proposal(statement: str, entry: str, reference: str, tests: str) -> str:
    stub = f"def {entry}({ARGS.get(entry, 'text')}):\n    raise NotImplementedError\n"
    return json.dumps(
        {"statement": statement, "entry_point": entry, "stub": stub, "reference": reference, "tests": tests}
    )


def replay(tmp_path: Path, outputs: list[str], name: str = "outputs.json"):
    path = tmp_path / name
    path.write_text(json.dumps(outputs))
    return make_policy(PolicySpec.parse(f"replay:{path}"))


def task_set(root: Path, problems: dict, proposer: str = "problems") -> Path:
    """A kept task set with its index, as an importer writes one."""
    rows = []
    for entry, (statement, body, check) in problems.items():
        source = TaskSource(proposer=proposer, origin="fixture", unit=entry)
        task = Task(id=f"{proposer}-{entry}", statement=statement, source=source,
                    entry_points=[EntryPoint(module="solution", function=entry)])  # fmt: skip
        written = write_solution_task(
            root / task.id,
            task,
            stub=f"def {entry}({ARGS[entry]}):\n    raise NotImplementedError\n",
            reference=f"def {entry}({ARGS[entry]}):\n    {body}\n",
            tests=f"from solution import {entry}\n\n\ndef test_it():\n    assert {check}\n",
        )
        rows.append(row_for(task.id, source, Validation(task_id=task.id, kept=True), written))
    write_index(root, rows)
    return root


def heldout_set(root: Path) -> Path:
    """The fixture's well-formed proposal as the one held-out task."""
    source = TaskSource(proposer="llm", origin="fixture", unit="held-rle")
    task = Task(id="held-rle", statement=WELL_FORMED["statement"], source=source,
                entry_points=[EntryPoint(module="solution", function="rle")])  # fmt: skip
    written = write_solution_task(
        root / task.id, task, stub=WELL_FORMED["stub"], reference=WELL_FORMED["reference"], tests=WELL_FORMED["tests"]
    )
    write_index(root, [row_for(task.id, source, Validation(task_id=task.id, kept=True), written)])
    return root


def test_replay_policy_answers_recorded_outputs(tmp_path: Path) -> None:
    policy = replay(tmp_path, ["first", "second"])
    messages = [{"role": "user", "content": "propose"}]
    assert [policy.episode(s, 1).act(messages, []).message["content"] for s in (0, 1, 2)] == [
        "first",
        "second",
        "first",
    ]
    (tmp_path / "bad.json").write_text(json.dumps([{"text": "no output key"}]))
    with pytest.raises(ValueError, match="item 0 is neither a string nor an object with 'output'"):
        make_policy(PolicySpec.parse(f"replay:{tmp_path / 'bad.json'}"))
    with pytest.raises(ValueError, match="cannot read"):
        make_policy(PolicySpec.parse(f"replay:{tmp_path / 'missing.json'}"))


def test_draw_imported_takes_its_quota_and_different_tasks_per_round(tmp_path: Path) -> None:
    sets = [task_set(tmp_path / "a", dict(list(PROBLEMS.items())[:2])), task_set(tmp_path / "b", PROBLEMS, "swebench")]
    drawn = {}
    for seed in range(6):
        out = tmp_path / f"round{seed}"
        assert draw_imported(out, sets, 3, random.Random(seed)) == 3
        drawn[seed] = tuple(t.id for t in load_task_set(out))
        assert {r.id for r in read_index(out)} == set(drawn[seed]) and all(r.status == "kept" for r in read_index(out))
    assert len(set(drawn.values())) > 1  # rounds draw different tasks
    # a quota beyond the pool takes the pool; ids already there are not copied twice
    assert draw_imported(tmp_path / "round0", sets, 10, random.Random(0)) == 2
    with pytest.raises(FileNotFoundError, match="without an index.parquet"):
        draw_imported(tmp_path / "x", [tmp_path / "nowhere"], 1, random.Random(0))


def test_source_mix_quotas_and_zero_valid_proposals_is_a_result(tmp_path: Path) -> None:
    """Imported tasks by quota; three self-proposals, none valid (malformed, a copy
    of the held-out task, a copy of an imported task): the round keeps its other
    tasks, records every proposal and says so plainly."""
    imported = task_set(tmp_path / "imported", PROBLEMS)
    heldout = heldout_set(tmp_path / "heldout")
    statement, body, check = PROBLEMS["clamp"]
    outputs = [
        BY_LABEL["malformed_json"],
        BY_LABEL["duplicate"],  # the held-out rle, renamed and reworded
        proposal(statement, "clamp", f"def clamp(x, lo, hi):\n    {body}\n", f"from solution import clamp\n\ndef test_c():\n    assert {check}\n"),
    ]  # fmt: skip
    mix = SourceMix(
        procedural=0,
        imported=[imported],
        n_imported=3,
        self_play=SelfPlayConfig(n=3, group_size=2, references=2),
    )
    policy = replay(tmp_path, outputs)
    out = tmp_path / "round"
    summary = propose_round(out, mix, seeds=None, heldout=heldout, policy=policy, rng_seed=1, round_key="r001")
    assert RoundSources.model_validate_json((out / SOURCES_FILE).read_text()) == summary
    assert summary.quotas == {"procedural": 0, "imported": 3, "self": 3}
    assert summary.outcomes["imported"].kept == 3 and summary.outcomes["self"].kept == 0
    assert summary.outcomes["self"].rejected == {"malformed": 1, "contaminated": 1, "duplicate": 1}
    assert summary.note.startswith("0 of 3 self-proposals were valid") and "continues" in summary.note
    assert len(load_task_set(out)) == 3
    records = read_proposals(out)
    assert [r.reason for r in records] == ["malformed", "contaminated", "duplicate"]
    assert "held-rle" in records[1].detail and "problems-clamp" in records[2].detail
    assert {r.policy for r in records} == {str(policy.spec)} and [r.group for r in records] == [0, 0, 1]
    assert records[0].prompt == records[1].prompt != records[2].prompt  # a group shares its prompt
    shown = set(records[0].references) | set(records[2].references)
    assert shown <= {t.id for t in load_task_set(imported)} and "held-rle" not in shown
    assert "Reference 1" in json.loads(records[0].prompt)[1]["content"]
    self_rows = [r for r in read_index(out) if r.id.startswith("self-")]
    assert len(self_rows) == 3 and {r.policy for r in self_rows} == {str(policy.spec)}


@pytest.mark.parametrize(
    "variant",
    [
        "renamed",  # the fixture's duplicate: names and statement changed, same program
        "reformatted",  # the same code with comments and blank lines, statement reworded
        "statement",  # the held-out statement verbatim over different code
    ],
)
def test_a_proposal_copying_a_heldout_task_is_contaminated(tmp_path: Path, variant: str) -> None:
    heldout = heldout_set(tmp_path / "heldout")
    ref = WELL_FORMED["reference"]
    text = {
        "renamed": BY_LABEL["duplicate"],
        "reformatted": proposal(
            "Encode a string by runs: a run of one repeated character becomes how many times it repeats, then the character.",
            "rle",
            "# run-length encoding\n\n" + ref.replace("    out = []", "    # collect the pieces\n\n    out = []"),
            WELL_FORMED["tests"],
        ),
        "statement": proposal(
            WELL_FORMED["statement"],
            "rle",
            "import itertools\n\ndef rle(text):\n    return ''.join(f'{len(list(g))}{k}' for k, g in itertools.groupby(text))\n",
            WELL_FORMED["tests"],
        ),
    }[variant]
    result = propose_self(replay(tmp_path, [text]), tmp_path / "out", cfg=SelfPlayConfig(n=1), pool=[], heldout=heldout)
    [record] = result.records
    assert (record.status, record.reason) == ("rejected", "contaminated")
    assert "held-out task held-rle" in record.detail


TOTAL = '''\
def total(xs):
    """The sum of xs."""
    s = 0
    for x in xs:
        s += x
    return s
'''
TOTAL_TESTS = """\
from tot import total


def test_total():
    assert total([]) == 0
    assert total([5]) == 5
    assert total([1, 2, 3]) == 6
    assert total([-1, 1]) == 0
"""


def tot_seed(root: Path) -> Path:
    """A seed project with one function its tests call."""
    (root / "tot").mkdir(parents=True)
    (root / "tot" / "__init__.py").write_text(TOTAL)
    (root / "tests").mkdir()
    (root / "tests" / "test_tot.py").write_text(TOTAL_TESTS)
    return root


def bug(function: str) -> str:
    return "```json\n" + json.dumps({"function": function}) + "\n```"


BUG_OUTPUTS = [
    bug(TOTAL.replace("s = 0", "s = 1")),  # a real bug the suite catches
    "I would change the loop.",  # no JSON
    bug(
        TOTAL.replace("s = 0", "acc = 0").replace("s += x", "acc += x").replace("return s", "return acc")
    ),  # renamed only
    bug(TOTAL.replace("s = 0", "s = 1").replace('"""The sum of xs."""', '"""Sum."""')),  # the first again
    bug(TOTAL.replace("    return s", "    s = s + 0\n    return s")),  # no test notices
    bug("def mean(xs):\n    return 0\n"),  # another function
]


def test_bug_proposals_are_judged_by_the_seed_tests(tmp_path: Path) -> None:
    """The bug kind: the policy rewrites a covered seed function; the seed's own
    tests decide (a bug nothing notices is `already_solved`), the statement comes
    from the failing tests, and the kept task carries the proposal's lineage."""
    policy = replay(tmp_path, BUG_OUTPUTS)
    out = tmp_path / "out"
    result = propose_self(
        policy,
        out,
        cfg=SelfPlayConfig(n=len(BUG_OUTPUTS), group_size=3, kinds=["bug"]),
        pool=[],
        heldout=None,
        seeds=[str(tot_seed(tmp_path / "tot-project"))],
        round_key="r002",
        validation=ValidationConfig(backend="bwrap"),
    )
    got = [(r.kind, r.reason or r.status) for r in result.records]
    assert got == [("bug", "kept"), ("bug", "malformed"), ("bug", "malformed"), ("bug", "duplicate"),
                   ("bug", "already_solved"), ("bug", "malformed")]  # fmt: skip
    assert "original program" in result.records[2].detail and "'total'" in result.records[5].detail
    assert {r.target for r in result.records} == {"tot-project:tot:total"}
    assert "def total(xs)" in json.loads(result.records[0].prompt)[1]["content"]
    [task] = load_task_set(out)
    assert task.source.operator == "llm_rewrite" and task.source.meta["proposal"]["policy"] == str(policy.spec)
    assert "total" in task.statement and "s = 1" not in task.statement
    assert (task.workspace_dir / "tot" / "__init__.py").read_text() == TOTAL.replace("s = 0", "s = 1")
    assert [r.policy for r in read_index(out) if r.status == "kept"] == [str(policy.spec)]


def test_self_kinds_are_checked() -> None:
    from pydantic import ValidationError

    from orchestration.resources import ProposeConfig

    with pytest.raises(ValidationError, match="standalone"):
        ProposeConfig(self_kinds=["bugs"]).mix()


@pytest.mark.parametrize(
    "leak",
    [
        'Hint: the loop is `while j < len(text) and text[j] == text[i]: j += 1` then `out.append(f"{j - i}{text[i]}")`.',
        "Encoded hint: " + base64.b64encode(b'out.append(f"{j - i}{text[i]}")\n        i = j').decode(),
    ],
)
def test_a_statement_that_gives_the_answer_away_is_a_leak(tmp_path: Path, leak: str) -> None:
    """Self-proposals go through validation's statement-leak check (static: no sandbox run)."""
    text = proposal(
        "Implement rle(text), a run-length encoder. " + leak,
        "rle",
        WELL_FORMED["reference"],
        WELL_FORMED["tests"],
    )
    result = propose_self(replay(tmp_path, [text]), tmp_path / "out", cfg=SelfPlayConfig(n=1), pool=[], heldout=None)
    [record] = result.records
    assert (record.status, record.reason) == ("rejected", "leak"), record.detail


def test_earlier_rounds_are_references_and_known_tasks(tmp_path: Path) -> None:
    assert earlier_round_keys(["r000", "r003", "r001", "r002", "r004"], "r003", 2) == ["r001", "r002"]
    assert earlier_round_keys(["r000", "r001"], "r001", 5) == ["r000"] and earlier_round_keys(["r000"], "r001", 0) == []
    before = task_set(tmp_path / "r000", {"evens": PROBLEMS["evens"]})
    statement, body, check = PROBLEMS["evens"]
    again = proposal(
        statement,
        "evens",
        f"def evens(xs):\n    {body}\n",
        f"from solution import evens\n\ndef test_e():\n    assert {check}\n",
    )
    mix = SourceMix(procedural=0, self_play=SelfPlayConfig(n=1, references=1))
    out = tmp_path / "r001"
    propose_round(out, mix, seeds=None, heldout=None, policy=replay(tmp_path, [again]), history=[before])
    [record] = read_proposals(out)
    assert record.reason == "duplicate" and record.references == ["problems-evens"]


def test_a_rewrite_replaces_exactly_its_function(tmp_path: Path) -> None:
    from touchstone.taskmaking.proposers.llm import ProposalError
    from touchstone.taskmaking.proposers.selfbug import Site, bug_messages, rewritten_file
    from touchstone.tasks.seeding import Seed

    (tmp_path / "m.py").write_text(
        "import os\n\n\nclass A:\n    @property\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n"
    )
    site = Site(Seed(name="proj==1.0", root=tmp_path, sources=("m.py",), tests=()), None, "m.py", "A.f")
    assert site.unit == "proj:m:A.f" and "@property\ndef f(self):" in bug_messages(site)[1]["content"]
    new = rewritten_file(bug("@property\ndef f(self):\n    return 0\n"), site)
    assert new == (tmp_path / "m.py").read_text().replace("return 1", "return 0")
    for answer, why in [
        (bug("def g(self):\n    return 0\n"), "exactly one function named 'f'"),
        (bug("def f(self):\n    return 0\n\ndef h():\n    pass\n"), "exactly one function"),
        (bug("@property\ndef f(this):\n    return 1\n"), "original program"),
        (bug("def f(self)\n    return 0\n"), "does not parse"),
        (json.dumps({"func": "def f(self): pass"}), "no 'function'"),
    ]:
        with pytest.raises(ProposalError, match=why):
            rewritten_file(answer, site)


def test_cli_propose_self(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from cli import main

    heldout = heldout_set(tmp_path / "heldout")
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps([BY_LABEL["duplicate"], "no task here"]))
    out = tmp_path / "out"
    args = ["propose", "self", "--policy", f"replay:{outputs}", "--n", "2", "--heldout", str(heldout)]
    result = CliRunner().invoke(main, [*args, "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rejected"] == 2
    assert [r.reason for r in read_proposals(out)] == ["contaminated", "malformed"]
    bad = CliRunner().invoke(main, ["propose", "self", "--policy", "nonsense", "--out", str(out)])
    assert bad.exit_code != 0 and "unknown policy spec" in bad.output
