"""The worked examples a statement states, read from its README, and the check a learners' release runs.

A learners' copy of the course (`course release`) holds no reference answer of a Python exercise: its
check.py (which computes or imports the answer) and any reference.py stay with the instructor. What the
copy still knows is the statement, and the statement states worked examples, in two written forms:

    | `cta_pool(384, 168)` | `64512` | 384 x 168 |           a table row: the call, then its value
    `swizzle128(3, 20) == 3*128 + (1^3)*16 + 4 == 420`     inline: the call == ... == its value

A call is a function of the statement on constant arguments (numbers, strings, tuples, lists, dicts,
None, True/False, arithmetic on numbers); a value is a constant too (its last `==` part inline; in a
table, the first cell after the call, its backquoted text or the text before a parenthesis). An example
that is not written this way is not read. A test holds each read example to the solution's answer.

    from judge.grading import exercise, worked_examples as W
    W.examples(exercise.get("setmaxnreg_split"))     # [Example(call="cta_pool(384, 168)", ...), ...]

In a release, `python practice/judge.py check ID` of a Python exercise runs check() below: the learner's
functions on these examples (through judge.grading.cpu_flow, in the learner's own process), and a
PASS says that it is the statement's examples only; the full grading is the instructor's.
Run its tests: PYTHONPATH=$PWD python -m pytest tests/grading/test_release.py -q
"""
from __future__ import annotations

import ast
import inspect
import operator
import re
from dataclasses import dataclass

_CALL = r"[a-z_][a-z_0-9]*\([^`]*\)"
_TABLE_ROW = re.compile(r"^\s*\|\s*`(" + _CALL + r")`\s*\|\s*([^|]+?)\s*\|")
_INLINE = re.compile(r"`(" + _CALL + r")\s*==\s*([^`]+)`")
SOURCE = "statement's examples only"
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.BitXor: operator.xor,
           ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift}


class NotConstant(ValueError):
    """Text that is not a constant the statement could state (a name, a call of something else)."""


def constant(node):
    """The value of a constant expression: literals, containers, set(), arithmetic on numbers."""
    if isinstance(node, ast.Constant) and node.value is not Ellipsis:     # `f(...)` names no call
        return node.value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [constant(e) for e in node.elts]
        return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict):
        return {constant(k): constant(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = constant(node.operand)
        return -v if isinstance(node.op, ast.USub) else +v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _BINOPS[type(node.op)](constant(node.left), constant(node.right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "set" and not node.args:
        return set()
    raise NotConstant(ast.dump(node)[:80])


def _value(text: str):
    text = text.strip()
    if text.startswith("`"):
        text = text[1:].split("`")[0]
    else:
        text = text.split(" (")[0]
    return constant(ast.parse(text.split("==")[-1].strip(), mode="eval").body)


@dataclass
class Example:
    """One worked example of a statement: the call as written, the function, its arguments, the value."""
    call: str
    function: str
    args: tuple
    kwargs: dict
    value: object


def parse(call: str, value_text: str) -> Example | None:
    """The example `call` -> value_text, or None when either is not a constant as written."""
    try:
        node = ast.parse(call, mode="eval").body
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            return None
        args = tuple(constant(a) for a in node.args)
        kwargs = {k.arg: constant(k.value) for k in node.keywords}
        return Example(call, node.func.id, args, kwargs, _value(value_text))
    except (SyntaxError, NotConstant, ValueError, TypeError, ZeroDivisionError):
        return None


def examples(ex) -> list[Example]:
    """Every worked example ex's statement states in a form read here (see the module's docstring)."""
    out, seen = [], set()
    for line in ex.statement_path.read_text().splitlines():
        found = [m.groups() for m in _INLINE.finditer(line)]
        if (m := _TABLE_ROW.match(line)) and "==" not in m.group(1):
            found.append(m.groups())
        for call, value in found:
            e = parse(call.strip(), value)
            if e is not None and e.call not in seen:
                seen.add(e.call)
                out.append(e)
    return out


def check(sub):
    """A release's check of a Python exercise: the statement's worked examples, and a plain word that the
    full grading (the listed edge cases, inputs drawn per run, the explanations) is the instructor's."""
    from judge.grading import cpu_flow as flow
    from judge.grading.result import Result, Verdict

    ex = sub.exercise
    found = examples(ex)
    full = (f"this copy of the course holds no reference answer for {ex.id}, so it grades the statement's worked "
            f"examples only: the full grading (edge cases and inputs drawn per run) is your instructor's")
    if not found:
        return Result(Verdict.SKIP, f"{full}; the statement of {ex.id} states no example in a form read here",
                      source=SOURCE, checked=["nothing: no reference answer in this copy"])
    functions = []
    for name in dict.fromkeys(e.function for e in found):
        mine = [e for e in found if e.function == name]
        functions.append(flow.Function(
            name, reference=_keyed({_key(e.args, e.kwargs): e.value for e in mine}),
            edges=[flow.Edge(flow.Args(*e.args, **e.kwargs), f"the statement's example {e.call}") for e in mine]))
    r = flow.run(sub, functions, checked=[f"the {len(found)} worked examples of the statement"])
    r.source = SOURCE
    if r.verdict == Verdict.PASS:
        r.message = f"right on the statement's {len(found)} worked examples; {full}"
    else:
        r.details.append(full)
    return r


def _key(args, kwargs):
    return repr((args, sorted(kwargs.items())))


def _keyed(values: dict):
    """A reference that answers the statement's examples only (the call's arguments as the key)."""
    def reference(*args, **kwargs):
        return values[_key(args, kwargs)]
    reference.__signature__ = inspect.Signature()   # calls are shown as the statement writes them, unnamed
    return reference
