"""The teacher: a deterministic program-repair agent, the round-0 policy on the
CPU default, where the tiny base model cannot act yet.

It works only through the public tools, like any policy: it runs the visible
tests, localizes the fault (frames of the traceback in library code,
functions called on failing test lines, functions named by the statement or
by the failing tests, and, when no frame is in library code, functions called
where the library mentions the failing tests' parameters: data registered at
import time), shows those functions with one `grep -A`, then tries
single-edit repairs (inverse AST mutations at the mutation proposer's own
sites: flipped comparisons, ±1, and/or, arithmetic operators, negated
conditions, ...) one `str_replace` at a time, re-running the tests after each,
and finally the functions those call. Edits near any traceback line come
first, then edits that make a line more like the code around it, then
operators the exception suggests. An edit that does not lower pytest's
failure count (without new failures) is undone by the next edit; one that
does is kept. It never reads hidden tests or the reference, and it fails
whenever the bug is not a single such edit, the visible tests do not expose
it, or its turn budget runs out (about 6 turns for the first candidate; 20-50
turns solve far more than 8). Its trajectories are ordinary trajectories and
are verified like any other.

Modules: `pytest_output` (reading test runs), `reading` (grep commands and
function windows), `edits` (candidate repairs and their ranking),
`procedure` (the repair loop). The policy `teacher`
(`touchstone/agent/policies/teacher.py`) adapts the procedure to chat turns.
"""

from touchstone.agent.teacher.procedure import FIRST_ACTION, TEST_COMMAND, Action, Procedure, repair

__all__ = ["FIRST_ACTION", "TEST_COMMAND", "Action", "Procedure", "repair"]
