"""judge.model.errors - the three ways a run on the CPU model ends early: WRONG, HANG, no verdict.

    from judge.model.errors import Violation, Hang, Unsupported

Violation carries a rule id from judge.model.checks.RULES (its PTX ISA section and the rule in one
line), where it happened (the learner's line and the PTX line) and a message that says what to fix.
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

    def __init__(self, instruction: str, why: str = ""):
        self.instruction = instruction
        super().__init__(f"the CPU model does not support `{instruction}`" + (f": {why}" if why else ""))
