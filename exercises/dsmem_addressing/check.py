"""Grader of dsmem_addressing: python practice/judge.py check dsmem_addressing

encode/decode are compared with the reference for every rank of a 16-block cluster at offsets
across 227 KiB; barriers_needed on the chapter's programs (cluster_sum with and without its last
barrier, the cluster histogram with and without its first) and on 300 random programs.
"""
from __future__ import annotations

import random

from judge.grading.grade import Result, Verdict, learner_error

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
}


def _random_program(rng):
    steps = []
    for _ in range(rng.randrange(2, 9)):
        if rng.random() < 0.25:
            steps.append(("sync",))
        else:
            steps.append((rng.choice(["st", "ld", "red"]), rng.choice(["own", "peer"]), rng.choice("xy")))
    return steps


def _norm(d):
    return {int(k): set(v) for k, v in d.items() if v}


def check(sub) -> Result:
    sub.progress("importing dsmem.py")
    mod = sub.learner_module()
    ref = sub.exercise.reference()
    checked = []
    sub.progress("encode / decode")
    rng = random.Random(7)
    for rank in range(16):
        for off in [0, 4, 1024, 0xFFFC, 227 * 1024 - 4] + [rng.randrange(0, 227 * 1024) for _ in range(20)]:
            try:
                got_a = mod.encode(rank, off)
                got_d = tuple(mod.decode(ref.encode(rank, off)))
            except Exception as e:  # noqa: BLE001
                return Result(Verdict.WRONG, learner_error(e, f"encode/decode(rank={rank}, offset={off})"))
            if got_a != ref.encode(rank, off):
                return Result(Verdict.WRONG, f"encode(rank={rank}, offset={off}) = {got_a:#x}, expected "
                              f"{ref.encode(rank, off):#x}", details=["mapa puts the rank in the top byte"])
            if got_d != (rank, off):
                return Result(Verdict.WRONG, f"decode({ref.encode(rank, off):#x}) = {got_d}, expected {(rank, off)}")
    checked.append("encode/decode for ranks 0-15 at 25 offsets each")
    programs = list(NAMED.items()) + [(f"random program {i}", _random_program(rng)) for i in range(300)]
    sub.progress(f"barriers_needed on {len(programs)} programs")
    for name, prog in programs:
        try:
            got = _norm(mod.barriers_needed(list(prog)))
        except Exception as e:  # noqa: BLE001
            return Result(Verdict.WRONG, learner_error(e, f"barriers_needed({prog})"), checked=checked)
        want = _norm(ref.barriers_needed(list(prog)))
        if got != want:
            idx = sorted(set(got) | set(want))
            diff = next(i for i in idx if got.get(i, set()) != want.get(i, set()))
            return Result(Verdict.WRONG, f"{name}: step {diff} {prog[diff]}: you say {sorted(got.get(diff, set())) or 'none'}, "
                          f"expected {sorted(want.get(diff, set())) or 'none'}",
                          details=[f"program: {prog}"], checked=checked)
    checked.append(f"barriers_needed on {len(NAMED)} named and 300 random programs")
    return Result(Verdict.PASS, "addresses and barriers right", checked=checked)
