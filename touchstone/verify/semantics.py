"""A task's declared comparison semantics, applied to the oracle's canonical
outcomes (`touchstone/harness/sandbox_files/codec.py`: `["int", 2]`,
`["float", "2.0"]`, `["list", [...]]`, `["sub", name, base, state]`,
`["dataclass", name, fields]`, `["raised", type, bases]`...).

One strict rule for every task rejects honest work wherever the statement
allows latitude (a list for "an iterable", `2.0` for `2`, a `defaultdict` for
"a dict", sorted output for "any order", another wording, a plain `ValueError`
for the reference's subclass, a namedtuple for a tuple). The proposer declares
the latitude in `source.meta.oracle` (docs/formats/task.md); each key below
relaxes exactly one equivalence, and the default of every key is the strict
rule. `contract` is a `touchstone.verify.oracle.OracleContract`.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

from touchstone.harness.sandbox_files import codec

_SEQUENCES = ("list", "tuple", "iterable", "iterator")


def normalize(c, contract):
    """`c` (a canonical value or outcome) with every declared latitude folded
    in, so that two answers the statement treats alike become equal."""
    if contract.iterables == "any":
        c = codec.any_iterable(c)
    return _fold(c, contract)


def _fold(c, contract):
    if not isinstance(c, list) or not c or not isinstance(c[0], str):
        return [_fold(e, contract) for e in c] if isinstance(c, list) else c
    tag = c[0]
    if tag in ("alias", "again") and len(c) in (2, 3):  # identity across the isolation wire (lockstep)
        return _fold(c[-1], contract) if contract.identity == "any" else [tag, *(_fold(e, contract) for e in c[1:])]
    if contract.records == "fields" and tag == "sub" and len(c) == 4:
        return _fold(c[2], contract)  # a namedtuple is its tuple, a list subclass its list
    if contract.records == "fields" and tag == "dataclass" and len(c) == 3:
        return ["record", [[k, _fold(v, contract)] for k, v in c[2]]]  # frozen or not, whatever its name
    if contract.mappings == "any":
        if tag == "sub" and len(c) == 4 and isinstance(c[2], list) and c[2][:1] in (["dict"], ["defaultdict"]):
            return _fold(c[2], contract)  # Counter, OrderedDict, a dict subclass: its items
        if tag == "defaultdict" and len(c) == 3:
            return _fold(["dict", c[2]], contract)
        if tag == "dict" and len(c) == 2:
            return ["dict", sorted(([_fold(k, contract), _fold(v, contract)] for k, v in c[1]), key=json.dumps)]
    if contract.numbers == "value":
        if tag == "int" and len(c) == 2 and type(c[1]) is int:
            return _number(c[1])
        if tag == "value" and len(c) == 3 and c[1] in ("fractions.Fraction", "decimal.Decimal"):
            return _number(Fraction(c[2]))
    if contract.text == "free" and tag == "str" and len(c) == 2 and isinstance(c[1], str):
        return ["str", "<free text>"]
    if tag == "float" and len(c) == 2:
        return c
    out = [tag] + [_fold(e, contract) for e in c[1:]]
    if contract.order == "any" and tag in _SEQUENCES and len(out) == 2 and isinstance(out[1], list):
        out[1] = sorted(out[1], key=json.dumps)  # the statement allows any order: compare as multisets
    return out


def _number(x) -> list:
    try:
        return ["float", repr(float(x))]
    except OverflowError:  # beyond a float: kept exact
        return ["int", int(x)] if x == int(x) else ["value", "fractions.Fraction", str(x)]


def same(a, b, contract=None) -> bool:
    """Canonical forms equal, exact in types and structure; floats within the
    task's tolerance (summation order is not a wrong answer); NaN equals only NaN."""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) == len(b) == 2 and a[0] == b[0] == "float" and isinstance(a[1], str) and isinstance(b[1], str):
            x, y = float(a[1]), float(b[1])
            if math.isnan(x) or math.isnan(y):
                return math.isnan(x) and math.isnan(y)
            rel, abs_ = (contract.float_rel_tol, contract.float_abs_tol) if contract else (1e-9, 1e-12)
            return math.isclose(x, y, rel_tol=rel, abs_tol=abs_)
        return len(a) == len(b) and all(same(x, y, contract) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def agrees(want: list, got: list, contract=None) -> bool:
    """A candidate outcome matches the reference's: `same`, or both raised and
    the candidate's exception is an instance of the reference's type (as
    `pytest.raises` accepts); with `exceptions: "family"`, of the builtin
    class the reference's exception derives from (a plain `ValueError` where
    the reference raises its own `ValueError` subclass)."""
    if want[0] == got[0] == "raised" and len(want) == len(got) == 3:
        if want[1] == got[1] or want[1] in got[2]:
            return True
        family = builtin_family(want)
        return (
            contract is not None
            and contract.exceptions == "family"
            and family is not None
            and (family == got[1] or family in got[2])
        )
    return same(want, got, contract)


def builtin_family(raised: list) -> str | None:
    """The nearest builtin exception class of a `["raised", type, bases]`
    outcome (`builtins.ValueError`), else None."""
    for name in [raised[1], *raised[2]]:
        if isinstance(name, str) and name.startswith("builtins.") and name not in ("builtins.Exception",):
            return name
    return None
