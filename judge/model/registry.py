"""judge.model.registry - which model function runs which PTX instruction, by name.

An instruction family registers each instruction it knows under its dotted PTX name; the longest
registered dotted prefix of an instruction wins, so a family can claim a whole family ("cp.async")
and a more specific one can take a single form ("cp.async.bulk.tensor"):

    from judge.model.registry import op

    @op("cp.async.wait_group", "cp.async.wait_all")
    def wait_group(m, ins):            # m: the Machine (judge.model.state), ins: judge.model.ptx.Instr
        def wait(ins, mask, full):     # mask: the threads that execute it; full: all of them do
            ...
        return wait

The factory runs once per instruction of the kernel (per cluster); what it returns runs each time
the instruction executes. A name the model does not know raises Unsupported naming it
(judge.model.scheduler.handler_for), never a verdict. The families live in judge/model/ops/.
"""
from __future__ import annotations

_REGISTRY: dict[str, object] = {}


def op(*names: str):
    """Register a handler factory for these dotted PTX instruction names (or name prefixes)."""
    def deco(factory):
        for n in names:
            if n in _REGISTRY and _REGISTRY[n] is not factory:
                raise ValueError(f"PTX instruction {n!r} is registered twice "
                                 f"({_REGISTRY[n].__module__} and {factory.__module__})")
            _REGISTRY[n] = factory
        return factory
    return deco


def lookup(parts) -> object | None:
    """The handler factory for an instruction given as its dotted parts (['cp', 'async', 'wait_group']):
    the longest registered prefix, or None."""
    for i in range(len(parts), 0, -1):
        f = _REGISTRY.get(".".join(parts[:i]))
        if f is not None:
            return f
    return None


def names() -> list[str]:
    """Every registered instruction name, sorted."""
    return sorted(_REGISTRY)
