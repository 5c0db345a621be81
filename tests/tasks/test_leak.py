"""The static leak check: artifacts by name and by content, and the reference's
change in any carrier and encoding; duplicated sibling code is not a leak."""

from __future__ import annotations

import base64
import codecs
import io
import zipfile
import zlib
from pathlib import Path

import pytest

from tests.tasks.adversarial import CASES
from touchstone.taskmaking.leak import changed_spans, find_leaks, listed_test_cases, hidden_test_cases
from touchstone.tasks.schema import Task, load_task

REF = "def area(w, h):\n    check(w)\n    return w * h\n\n\ndef other():\n    return 1\n"
WS = "def area(w, h):\n    check(w)\n    return w + h\n\n\ndef other():\n    return 1\n"
ANSWER = "    return w * h\n"


def make(tmp_path: Path, statement: str = "area is wrong for rectangles", ws: str = WS, ref: str = REF) -> Path:
    d = tmp_path / "t"
    for sub in ("workspace", "hidden_tests", "reference"):
        (d / sub).mkdir(parents=True)
    (d / "workspace" / "geo.py").write_text(ws)
    (d / "reference" / "geo.py").write_text(ref)
    (d / "hidden_tests" / "test_geo.py").write_text(
        "from geo import area\n\ndef test_area():\n    assert area(2, 3) == 6\n"
    )
    Task(id="t", statement=statement).write(d)
    return d


def test_clean_task_has_no_leak(tmp_path: Path) -> None:
    assert find_leaks(load_task(make(tmp_path))) == []
    assert changed_spans(REF, WS) == [("return", "w", "*", "h")]


def test_backup_copy_vcs_and_caches_are_leaks(tmp_path: Path) -> None:
    d = make(tmp_path)
    (d / "workspace" / "geo.py.orig").write_text(REF)
    (d / "workspace" / ".git").mkdir()
    (d / "workspace" / "pkg" / "__pycache__").mkdir(parents=True)
    (d / "workspace" / "old").mkdir()
    (d / "workspace" / "old" / "geo_v1.py").write_text("# previous version\n" + REF)
    problems = find_leaks(load_task(d))
    assert any("geo.py.orig" in p for p in problems)
    assert any(p.startswith("workspace/.git:") for p in problems)
    assert any("__pycache__" in p for p in problems)
    assert any(p.startswith("workspace/old/geo_v1.py: defines area") for p in problems)


@pytest.mark.parametrize(
    "statement",
    [
        "Fix area; it should read:\n    check(w)\n    return w * h\n",
        "area must `return w*h`",  # reformatted, without its context line
        "Hint: " + base64.b64encode(ANSWER.encode()).decode(),
        "Hint: " + ANSWER.strip()[::-1],
        "Hint: " + codecs.encode(ANSWER, "rot13"),
        "Hint: " + ANSWER.encode().hex(),
        "Hint: " + base64.urlsafe_b64encode(zlib.compress(ANSWER.encode())).decode(),
    ],
)
def test_statement_that_gives_the_answer_in_any_form_is_a_leak(tmp_path: Path, statement: str) -> None:
    problems = find_leaks(load_task(make(tmp_path, statement=statement)))
    assert len(problems) == 1 and problems[0].startswith(
        "task.json statement: contains the reference's change to geo.py"
    )


@pytest.mark.parametrize(
    "stub",
    [
        WS.replace("    return w + h\n", "    # return w * h\n    return w + h\n"),  # commented out in the stub
        WS + "\nHINT = 'cmV0dXJuIHcgKiBo'\n",  # base64 in a string literal
        WS + "\n_X = '\\x72\\x65\\x74\\x75\\x72\\x6e\\x20\\x77\\x20\\x2a\\x20\\x68'\n",  # escaped bytes
        WS + "\n_Y = [114, 101, 116, 117, 114, 110, 32, 119, 32, 42, 32, 104]\n",  # character codes
        WS.replace("def other():", 'def other():\n    """h * w nruter"""'),  # reversed docstring
    ],
)
def test_answer_hidden_in_the_stubs_inert_text_is_a_leak(tmp_path: Path, stub: str) -> None:
    problems = find_leaks(load_task(make(tmp_path, ws=stub)))
    assert problems and problems[0].startswith("workspace/geo.py: contains the reference's change to geo.py")


def test_answer_in_a_non_python_file_is_a_leak(tmp_path: Path) -> None:
    d = make(tmp_path)
    (d / "workspace" / "NOTES.md").write_text("the fix:   return   w*h   (see geo)\n")
    assert find_leaks(load_task(d)) == ["workspace/NOTES.md: contains the reference's change to geo.py"]


def _zip(text: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("geo.py", text)
    return buf.getvalue()


@pytest.mark.parametrize(
    "name, data, kind",
    [
        ("data.bin", b"\xa7\r\r\n" + b"\0" * 12 + b"\xe3marshal", "Python bytecode"),  # a .pyc renamed
        ("vendor.dat", _zip(REF), "zip archive"),
        ("cache.db", zlib.compress(b"blob 71\x00" + REF.encode()), "git loose object"),
        ("blob", b"PACK\x00\x00\x00\x02", "git pack"),
        ("weights.pkl", b"\x80\x04\x95" + b"\x00" * 20 + b".", "pickle data"),
        ("img.raw", b"\x01\x02\x00\x03" * 10, "binary file"),
    ],
)
def test_binary_and_container_files_are_flagged_by_content(tmp_path: Path, name: str, data: bytes, kind: str) -> None:
    d = make(tmp_path)
    (d / "workspace" / name).write_bytes(data)
    [problem] = find_leaks(load_task(d))
    assert problem.startswith(f"workspace/{name}: {kind}")


def test_a_bare_git_repository_under_another_name_is_flagged(tmp_path: Path) -> None:
    d = make(tmp_path)
    store = d / "workspace" / "assets" / "history"
    (store / "objects" / "ab").mkdir(parents=True)
    (store / "refs" / "heads").mkdir(parents=True)
    (store / "HEAD").write_text("ref: refs/heads/main\n")
    problems = find_leaks(load_task(d))
    assert "workspace/assets/history: git object store / repository (under another name)" in problems


def test_duplicated_sibling_code_is_not_a_leak(tmp_path: Path) -> None:
    """A sibling function with the same body as the fixed one, in the same module
    and in another one, under another name: ordinary duplicated code."""
    sibling = "\n\ndef rect_area(w, h):\n    check(w)\n    return w * h\n"
    d = make(tmp_path, ws=WS + sibling, ref=REF + sibling)
    (d / "workspace" / "shapes.py").write_text("def box_area(a, b):\n    check(a)\n    return a * b\n")
    assert find_leaks(load_task(d)) == []


def test_same_named_copy_behind_a_flag_is_a_leak(tmp_path: Path) -> None:
    stub = WS + "\n\nif False:\n    def area(width, height):\n        check(width)\n        return width * height\n"
    problems = find_leaks(load_task(make(tmp_path, ws=stub)))
    assert problems == ["workspace/geo.py: defines area (line 11) exactly as the reference does"]


def test_flag_probes_flip_booleans_to_booleans_and_ints_to_ints():
    from touchstone.taskmaking.leak import flag_probes

    source = "DEBUG = True\nFAST = 0\nCACHE = None\n\ndef f():\n    return DEBUG\n"
    (_, all_flipped), *single = flag_probes(source)
    assert all_flipped.splitlines()[:3] == ["DEBUG = False", "FAST = 1", "CACHE = True"]
    assert len(single) == 3


# -- a statement that lists the hidden test cases ---------------------------------------------


def test_a_statement_listing_the_test_cases_is_a_leak_and_an_example_is_not(tmp_path: Path) -> None:
    listed = next(c for c in CASES if c.id == "leak-lists-test-cases").write(tmp_path)
    [finding] = listed_test_cases(listed)
    assert "lists 4 of the 5 hidden test cases" in finding and "'aaab' -> [('a', 3), ('b', 1)]" in finding
    example = next(c for c in CASES if c.id == "honest-statement-example").write(tmp_path)
    assert listed_test_cases(example) == [] and find_leaks(example) == []


def test_test_cases_come_from_asserts_either_way_round_and_parametrize_rows(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text(
        "import pytest\nfrom m import f\n\n\ndef test_a():\n    assert f(2, 'b') == [1]\n    assert 3 == f(9)\n"
        "    assert f(0) is None\n    assert f(1) > 0\n\n\n"
        "@pytest.mark.parametrize('x, want', [(1, 'one'), ((2, 3), 'pair')])\ndef test_b(x, want):\n"
        "    assert f(x) == want\n"
    )
    assert hidden_test_cases(tmp_path) == [
        ("2, 'b'", "[1]"),
        ("9", "3"),
        ("0", "None"),
        ("1", "'one'"),
        ("(2, 3)", "'pair'"),
    ]
