"""Grader of dsmem_addressing: python practice/judge.py check dsmem_addressing

The four functions of the statement, each called directly (judge.grading.cpu_flow) and compared with
the statement's rules (the reference below): encode/decode/mapa for ranks 0-15 at offsets across the
24-bit range, mapa on addresses that carry a rank other than 0 (where OR-ing the rank in goes wrong),
barriers_needed on the chapter's programs (cluster_sum with and without its last barrier, the
cluster histogram with and without its first, two atomic adds) and on programs drawn at random.
"""
from __future__ import annotations

from hypothesis import strategies as st

from judge.grading import checks
from judge.grading import cpu_flow as flow

SHIFT, LOW = 24, (1 << 24) - 1

NAMED = {
    "cluster_sum": [("st", "own", "mine"), ("sync",), ("ld", "peer", "mine"), ("sync",)],
    "cluster_sum without its last barrier": [("st", "own", "mine"), ("sync",), ("ld", "peer", "mine")],
    "histogram": [("st", "own", "counts"), ("sync",), ("red", "own", "counts"), ("red", "peer", "counts"),
                  ("sync",), ("ld", "own", "counts")],
    "histogram without its first barrier": [("st", "own", "counts"), ("red", "own", "counts"),
                                            ("red", "peer", "counts"), ("sync",), ("ld", "own", "counts")],
    "a read of a peer before it wrote": [("sync",), ("ld", "peer", "v"), ("st", "own", "v"), ("sync",)],
    "exchange through two buffers": [("st", "own", "a"), ("sync",), ("ld", "peer", "a"), ("st", "own", "b"),
                                     ("sync",), ("ld", "peer", "b"), ("sync",)],
    "two atomic adds on one var do not conflict": [("sync",), ("red", "own", "x"), ("red", "peer", "x"), ("sync",)],
    "two loads do not conflict": [("sync",), ("ld", "peer", "x"), ("ld", "own", "x"), ("sync",)],
    "an atomic add after a peer load of the same var": [("sync",), ("ld", "peer", "x"), ("red", "own", "x"), ("sync",)],
    "a peer load before any barrier": [("ld", "peer", "x"), ("sync",)],
    "no peer step at all": [("st", "own", "x"), ("sync",), ("ld", "own", "x")],
    "an empty program": [],
}


# ------------------------------------------------------------------ the reference (the statement's rules)
def encode(rank, offset):
    return (rank << SHIFT) | offset


def decode(address):
    return address >> SHIFT, address & LOW


def mapa(address, rank):
    return (rank << SHIFT) | (address & LOW)


def _segments(program):
    seg, out = 0, []
    for step in program:
        seg += step[0] == "sync"
        out.append(seg)
    return out


def _conflict(a, b):
    return not (a == "red" and b == "red") and ("st" in (a, b) or "red" in (a, b))


def reasons(program):
    """{peer step index: {mark: why}}: every barrier each peer step needs, with the rule that asks for it."""
    segs = _segments(program)
    last = segs[-1] if segs else 0
    out = {}
    for i, step in enumerate(program):
        if step[0] == "sync" or step[1] != "peer":
            continue
        why = {}
        if segs[i] == 0:
            why["before"] = "start: no barrier before it, so the peer may not have started"
        if segs[i] == last:
            why["after"] = "exit: no barrier after it, so the peer may already have exited"
        for j, other in enumerate(program):
            if other[0] != "sync" and other[1] == "own" and other[2] == step[2] and segs[j] == segs[i] \
                    and _conflict(step[0], other[0]):
                why.setdefault("before" if j < i else "after",
                               f"conflict: the peer's own step {j} {other} on {step[2]!r} in the same segment "
                               f"{'writes' if other[0] != 'ld' else 'reads while this step writes'}")
        if why:
            out[i] = why
    return out


def barriers_needed(program):
    return {i: set(w) for i, w in reasons(program).items()}


# ------------------------------------------------------------------ comparing and explaining
def _as_marks(got):
    """The learner's dict as {int: set of str} without empty entries, or what is wrong with it."""
    if not isinstance(got, dict):
        return None, f"expected a dict {{step index: set of 'before'/'after'}}, got {checks.show(got)}"
    out = {}
    for k, v in got.items():
        if checks.as_integer(k) is None:
            return None, f"key {k!r} is not a step index"
        if isinstance(v, str) or not isinstance(v, (set, frozenset, list, tuple)):
            return None, f"step {k}: {v!r} is not a set of 'before'/'after'"
        if set(v) - {"before", "after"}:
            return None, f"step {k}: {sorted(map(str, v))} holds something other than 'before' and 'after'"
        if v:
            out[int(k)] = set(v)
    return out, None


def compare_marks(got, want):
    marks, problem = _as_marks(got)
    if problem:
        return problem
    if marks == want:
        return None
    i = min(k for k in set(marks) | set(want) if marks.get(k, set()) != want.get(k, set()))
    return f"step {i}: you say {sorted(marks.get(i, set())) or 'none'}, expected {sorted(want.get(i, set())) or 'none'}"


def explain_marks(call, got, want):
    program = call.args[0]
    marks, _ = _as_marks(got)
    why = reasons(program)
    if marks is None:
        return []
    i = min((k for k in set(marks) | set(want) if marks.get(k, set()) != want.get(k, set())), default=None)
    if i is None:
        return []
    segs = _segments(program)
    lines = [f"step {i} {program[i]} is in segment {segs[i]} of 0..{segs[-1]}"]
    lines += [f"it needs '{m}': {w}" for m, w in sorted(why.get(i, {}).items())]
    for m in sorted(marks.get(i, set()) - want.get(i, set())):
        lines.append(f"it does not need '{m}': a barrier stands on that side, and no conflicting own step of the "
                     f"peer shares its segment there (two atomic adds do not conflict, nor do two loads)")
    return lines


def compare_address(got, want):
    """same(), with addresses written in hex."""
    problem = flow.same(got, want)
    if problem and checks.as_integer(got) is not None and isinstance(want, int):
        return f"got {int(got):#x}, expected {want:#x}"
    return problem


def _hex(a):
    return f"{a:#x} = rank {a >> SHIFT}, offset {a & LOW:#x}"


def explain_address(call, got, want):
    lines = ["the rank sits in bits 24-31 and the offset in bits 0-23: (rank << 24) | offset"]
    if len(call.args) == 1:
        lines.insert(0, f"the address is {_hex(call.args[0])}")
    return lines


def explain_mapa(call, got, want):
    address, rank = call.args
    lines = [f"the address is {_hex(address)}; the same byte in rank {rank} is {_hex(want)}",
             "mapa REPLACES the top byte (the block's own rank, put there by LEA over SR_CgaCtaId) with the "
             "target rank: (rank << 24) | (address & 0xFFFFFF)"]
    if checks.is_number(got) and int(got) == (rank << SHIFT) | address and address >> SHIFT:
        lines.insert(0, f"you OR-ed the rank into an address whose top byte already holds rank {address >> SHIFT}: "
                        f"that is right only for addresses of the block of rank 0")
    return lines


# ------------------------------------------------------------------ inputs
ranks, offsets = st.integers(0, 15), st.integers(0, LOW)
addresses = st.builds(lambda r, o: (r << SHIFT) | o, ranks, offsets)
steps = st.one_of(st.just(("sync",)), st.tuples(st.sampled_from(["st", "ld", "red"]), st.sampled_from(["own", "peer"]),
                                                st.sampled_from(["x", "y"])))
programs = st.tuples(st.lists(steps, max_size=10))
OFFSETS = [0, 4, 1024, 0xFFFC, 227 * 1024 - 4, LOW]


def check(sub):
    functions = [
        flow.Function("encode", reference=encode, args=st.tuples(ranks, offsets),
                      edges=[flow.Edge((r, o)) for r in (0, 1, 7, 15) for o in OFFSETS], compare=compare_address,
                      explain=explain_address),
        flow.Function("decode", reference=decode, args=st.tuples(addresses),
                      edges=[flow.Edge((encode(r, o),)) for r in (0, 1, 7, 15) for o in OFFSETS],
                      explain=explain_address),
        flow.Function("mapa", reference=mapa, args=st.tuples(addresses, ranks),
                      edges=[flow.Edge((encode(0, 0x400), 5), "an address of rank 0"),
                             flow.Edge((encode(3, 0x400), 5), "an address of rank 3: its top byte is 3, not 0"),
                             flow.Edge((encode(5, 0x1234), 0), "back to rank 0"),
                             flow.Edge((encode(15, LOW), 9), "the highest rank and offset")],
                      compare=compare_address, explain=explain_mapa),
        flow.Function("barriers_needed", reference=barriers_needed, args=programs,
                      edges=[flow.Edge((p,), name) for name, p in NAMED.items()],
                      compare=compare_marks, explain=explain_marks),
    ]
    return flow.run(sub, functions)
