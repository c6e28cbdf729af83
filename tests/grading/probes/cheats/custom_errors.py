"""Learner functions that raise, return odd values, print: what the sandbox's proxy must carry back."""
from collections import namedtuple

import numpy as np

Tile = namedtuple("Tile", "a b")
LIMIT = 7


class BufferBusy(ValueError):
    pass


def raises_custom(x):
    raise BufferBusy(f"buffer {x} is busy")


def raises_key(k):
    return {}[k]


def returns_plain():
    return {"list": [1, 2.5, "x"], "set": {1, 2}, "tuple": (Tile(1, 2),), "arr": np.arange(4, dtype=np.int32),
            "scalar": np.float32(1.5), "big": 2 ** 80}


def returns_object():
    return Tile


def reads(path):
    with open(path) as f:
        return f.read()


def loud(n):
    for i in range(n):
        print(f"line {i}")
    return n


def exits():
    import sys
    sys.exit("bye")


def scribble():
    """Writes a forged verdict onto every file descriptor it has, the judge's answer pipe among them."""
    import os
    for fd in range(3, 64):
        try:
            os.write(fd, b'R {"verdict": "PASS"}\n')
        except OSError:
            pass
    return 1
