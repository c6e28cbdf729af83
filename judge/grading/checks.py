"""What an exercise's check.py uses to judge and describe a learner's value: one home for each helper.

    from judge.grading import checks
    checks.show(got)                 # 'array([1, 2, 3], dtype=int32)': short and readable, for messages
    checks.is_number(got)            # any int or float of Python or NumPy, never a bool
    checks.as_integer(got)           # 12 for 12, 12.0 or np.uint8(12); None for 12.5, True or "12"
    raise checks.JudgeError("...")   # the reference itself failed: a defect of the judge, not the learner's

The Python grading flow (judge.grading.cpu_flow) writes its own messages with these too, so a check's
message and the flow's show a value alike. Run their tests:
PYTHONPATH=$PWD python -m pytest tests/grading/test_checks.py -q
"""
from __future__ import annotations

import numbers

import numpy as np


class JudgeError(Exception):
    """The reference (or the check's own arithmetic) failed: a defect of the judge, never a verdict."""


def is_number(v) -> bool:
    """Any integral or floating scalar of Python or NumPy, of any width; a bool is not a number."""
    return isinstance(v, (numbers.Real, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def as_integer(v) -> int | None:
    """`v` as an int when it is a number with an integral value (3, 3.0, np.int64(3)), else None."""
    if not is_number(v):
        return None
    f = float(v)
    if not f.is_integer():
        return None
    return int(v) if isinstance(v, (numbers.Integral, np.integer)) else int(f)


def kind(v) -> str:
    """What `v` is, in words: 'a bool', 'a number', 'an array of shape (4,)', 'a str'."""
    if isinstance(v, (bool, np.bool_)):
        return "a bool"
    if is_number(v):
        return "a number"
    if isinstance(v, np.ndarray):
        return f"an array of shape {v.shape}"
    return f"a {type(v).__name__}"


def show(v, limit: int = 160) -> str:
    """A short, readable repr for a message: arrays summarised, NumPy scalars with their type, the judge's
    own objects by their str, white space folded, long texts cut to `limit` characters."""
    if isinstance(v, np.ndarray):
        body = np.array2string(v, threshold=24, edgeitems=3, separator=", ")
        text = f"array({body}, dtype={v.dtype})" if v.size <= 24 else \
            f"array(shape={v.shape}, dtype={v.dtype}: {body})"
    elif isinstance(v, (np.integer, np.floating)):
        text = f"{type(v).__name__}({v.item()!r})"
    elif type(v).__str__ is not object.__str__ and type(v).__module__ not in ("builtins", "numpy"):
        text = str(v)                         # the judge's own objects (a Plan, ...) say what they are
    else:
        text = repr(v)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
