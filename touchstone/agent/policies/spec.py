"""Which policy acts: a `PolicySpec`, parsed once where a spec enters (the CLI,
a round's config) and handed down typed, so no module below splits strings.

Its text form is what the CLI takes and what records store, unchanged:
`teacher`, `hf:PATH`, `openai:BASE_URL#MODEL`, `replay:JSON`, `corrected:SPEC`
(the teacher correcting the learner SPEC) and the experiments' `hack-prone:P[:SPLIT+SPLIT]`.
`PolicySpec.parse(str(spec)) == spec` for every spec."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SCHEMES = ("teacher", "hf", "openai", "replay", "corrected", "hack-prone")
_EXPECTED = (
    "'teacher', 'hf:PATH', 'openai:BASE_URL#MODEL', 'replay:JSON', 'corrected:SPEC' or 'hack-prone:P[:SPLIT+SPLIT]'"
)


class PolicySpecError(ValueError):
    """A policy spec that names no policy, or names one with a bad argument."""


@dataclass(frozen=True)
class PolicySpec:
    scheme: str
    arg: str = ""  # everything after the first ':' (empty for the teacher)

    @classmethod
    def parse(cls, text: str) -> PolicySpec:
        """The spec `text` names; raises `PolicySpecError` naming what is wrong."""
        scheme, _, arg = text.partition(":")
        if scheme not in SCHEMES:
            raise PolicySpecError(f"unknown policy spec {text!r}: expected {_EXPECTED}")
        if scheme == "teacher" and arg:
            raise PolicySpecError(f"policy spec {text!r}: 'teacher' takes no argument")
        if scheme != "teacher" and not arg:
            raise PolicySpecError(f"policy spec {text!r}: {scheme}: needs an argument after ':'")
        spec = cls(scheme, arg)
        spec._check(text)
        return spec

    def _check(self, text: str) -> None:
        if self.scheme == "openai":
            base_url, sep, model = self.arg.partition("#")
            if not sep or not model or not base_url.startswith(("http://", "https://")):
                raise PolicySpecError(
                    f"policy spec {text!r}: expected openai:BASE_URL#MODEL, e.g. openai:http://127.0.0.1:8000/v1#my-model"
                )
        elif self.scheme == "corrected":
            if PolicySpec.parse(self.arg).scheme == "corrected":
                raise PolicySpecError(
                    f"policy spec {text!r}: the learner after 'corrected:' cannot itself be corrected"
                )
        elif self.scheme == "hack-prone":
            try:
                rate = self.hack_rate
            except ValueError:
                rate = -1.0
            if not 0.0 <= rate <= 1.0:
                raise PolicySpecError(f"policy spec {text!r}: expected hack-prone:P[:SPLIT+SPLIT] with 0 <= P <= 1")

    def __str__(self) -> str:
        return f"{self.scheme}:{self.arg}" if self.arg else self.scheme

    @property
    def is_teacher(self) -> bool:
        return self.scheme == "teacher"

    @property
    def path(self) -> Path:
        """The checkpoint directory of `hf:PATH`, the recorded outputs of `replay:JSON`."""
        return Path(self.arg)

    @property
    def endpoint(self) -> tuple[str, str]:
        """(base URL, model) of `openai:BASE_URL#MODEL`."""
        base_url, _, model = self.arg.partition("#")
        return base_url, model

    @property
    def learner(self) -> PolicySpec:
        """The learner that `corrected:SPEC` corrects."""
        return PolicySpec.parse(self.arg)

    @property
    def hack_rate(self) -> float:
        """P of `hack-prone:P[:SPLIT+SPLIT]`."""
        return float(self.arg.partition(":")[0])

    @property
    def hack_splits(self) -> list[str]:
        """The hack families' splits of `hack-prone:P:SPLIT+SPLIT` (default: the named ones)."""
        splits = self.arg.partition(":")[2]
        return splits.split("+") if splits else ["named"]

    def corrected(self) -> PolicySpec:
        """The teacher correcting this policy."""
        return PolicySpec("corrected", str(self))


TEACHER = PolicySpec("teacher")
