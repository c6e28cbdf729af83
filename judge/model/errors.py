"""judge.model.errors - the three ways a run on the CPU model ends early: WRONG, HANG, no verdict.

    from judge.model.errors import Violation, Hang, Unsupported

Violation carries a rule id from judge.model.checks.RULES (its PTX ISA section and the rule in one
line), where it happened (the learner's line and the PTX line) and a message that says what to fix.
Places are built by judge.model.state.Machine.where (judge.model.ptx.place): the learner's file and line,
or a header's own file and line and the learner's line that called into it. Hang messages name the
places where the threads wait; Unsupported names the place of the instruction (Unsupported.at).
"""
from __future__ import annotations


class Violation(Exception):
    """A rule of the PTX memory model or of an asynchronous unit was broken: verdict WRONG."""

    def __init__(self, rule: str, where: str, message: str):
        self.rule, self.where, self.message = rule, where, message
        super().__init__(f"[{rule}] {message}")


class Hang(Exception):
    """Every live thread waits on something that can never happen (or the budget ran out)."""

    def __init__(self, message: str, graph: list | None = None):
        self.message, self.graph = message, graph or []
        super().__init__(message)


class Unsupported(Exception):
    """The model does not know this PTX instruction (or form): it cannot judge the kernel."""

    def __init__(self, instruction: str, why: str = "", where: str = ""):
        self.instruction, self.why, self.where = instruction, why, where
        super().__init__(instruction, why, where)

    def at(self, where: str) -> "Unsupported":
        """Name the place (judge.model.state.Machine.where) where the model met it, unless one is named."""
        self.where = self.where or where
        self.args = (self.instruction, self.why, self.where)     # a pickled copy keeps the place too
        return self

    def __str__(self):
        return (f"the CPU model does not support `{self.instruction}`" + (f": {self.why}" if self.why else "")
                + (f" (at {self.where})" if self.where else ""))
