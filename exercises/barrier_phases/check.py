"""Grader of barrier_phases: python practice/judge.py check barrier_phases

Two checks:
1. the table: (slot, parity) for S = 1..8 and i = 0..100 against solution.py;
2. a simulator: a producer, a consumer and a TMA engine run over a model of mbarriers
   (phase counter, pending arrivals, transaction bytes; try_wait.parity as the PTX ISA
   defines it) under several schedules, with the learner's slots and parities. It reports a
   deadlock, a consumer reading a slot before its TMA landed, or a TMA overwriting a slot the
   consumer has not released: the story of what goes wrong on the GPU.
"""
import random

from judge.grading.grade import Result, Verdict, learner_error

SLOTS = range(1, 9)
ITERS = 101
SIM_ITERS = 30
TILE_BYTES = 4096


class MBarrier:
    """An mbarrier: init(count) starts phase 0; a phase completes when its arrivals and bytes are in."""

    def __init__(self, name, count=1):
        self.name, self.count, self.pending, self.tx, self.phase = name, count, count, 0, 0

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1                       # the current phase completes; the next begins
            self.pending = self.count

    def arrive(self, expect_tx=0):
        self.tx += expect_tx
        self.pending -= 1
        self._maybe_complete()

    def complete_tx(self, nbytes):
        self.tx -= nbytes
        self._maybe_complete()

    def try_wait_parity(self, p):
        """True once the phase of parity p completed: p must name the current phase (-> False)
        or the one before it (-> True); before any completion, 'the one before' is phase -1."""
        return p != self.phase % 2


class Failure(Exception):
    pass


def simulate(producer_wait, consumer_wait, S, n, policy, seed=0):
    """Run n iterations; raise Failure with the story, or return None."""
    full = [MBarrier(f"full[{s}]") for s in range(S)]
    empty = [MBarrier(f"empty[{s}]") for s in range(S)]
    buf = [None] * S                    # which iteration's tile each slot holds
    owner = [None] * S                  # the iteration the slot was last filled for
    released = [True] * S               # the consumer is done with that iteration's tile
    inflight = []                       # TMA loads issued, not landed: (slot, iteration)
    p_i = c_i = 0
    rng = random.Random(seed)

    def ask(fn, who, i):
        try:
            slot, parity = fn(i, S)
        except Exception as e:  # noqa: BLE001
            raise Failure(learner_error(e, f"{fn.__name__}({i}, {S})")) from None
        if slot not in range(S) or parity not in (0, 1):
            raise Failure(f"{fn.__name__}({i}, {S}) returned ({slot!r}, {parity!r}): the slot must be 0..{S - 1} "
                          f"and the parity 0 or 1 (the only valid phaseParity values)")
        return slot, parity

    def producer_step():
        nonlocal p_i
        s, p = ask(producer_wait, "producer", p_i)
        if not empty[s].try_wait_parity(p):
            return False
        if not released[s]:
            raise Failure(f"S={S}: the producer passed empty[{s}] (parity {p}) at iteration {p_i} and refilled "
                          f"slot {s} while iteration {owner[s]}'s tile in it was not consumed yet")
        released[s], owner[s] = False, p_i
        full[s].arrive(expect_tx=TILE_BYTES)        # arrive.expect_tx, then the TMA load
        inflight.append((s, p_i))
        p_i += 1
        return True

    def consumer_step():
        nonlocal c_i
        s, p = ask(consumer_wait, "consumer", c_i)
        if not full[s].try_wait_parity(p):
            return False
        if buf[s] != c_i:
            what = "nothing yet" if buf[s] is None else f"iteration {buf[s]}'s tile"
            raise Failure(f"S={S}: the consumer passed full[{s}] (parity {p}) at iteration {c_i} and read slot "
                          f"{s}, which held {what}: it read before that iteration's TMA load landed")
        buf[s] = None
        released[s] = True
        empty[s].arrive()
        c_i += 1
        return True

    def tma_step(k=0):
        s, it = inflight.pop(k)
        buf[s] = it
        full[s].complete_tx(TILE_BYTES)
        return True

    while c_i < n:
        moves = []
        if p_i < n:
            moves.append(producer_step)
        moves.append(consumer_step)
        order = {"producer first": moves, "consumer first": moves[::-1]}.get(policy)
        if order is None:
            order = moves[:]
            rng.shuffle(order)
        if policy == "random" and inflight and rng.random() < 0.5:
            tma_step(rng.randrange(len(inflight)))
            continue
        if any(step() for step in order):
            continue
        if inflight:                    # the TMA lands only when nobody else can move: the slowest memory
            tma_step(0)
            continue
        ps, pp = ask(producer_wait, "producer", p_i) if p_i < n else (None, None)
        cs, cp = ask(consumer_wait, "consumer", c_i)
        prod = (f"the producer waits on empty[{ps}] with parity {pp} (phase {empty[ps].phase} is current)"
                if ps is not None else "the producer is done")
        raise Failure(f"S={S}: deadlock at producer iteration {p_i}, consumer iteration {c_i}: {prod}; "
                      f"the consumer waits on full[{cs}] with parity {cp} (phase {full[cs].phase} is current)")
    return None



def check(sub) -> Result:
    sub.progress("importing phases.py")
    mod = sub.learner_module("producer_wait", "consumer_wait")
    fns = {"producer_wait": mod.producer_wait, "consumer_wait": mod.consumer_wait}
    ref = sub.exercise.reference()

    sub.progress(f"table: S = 1..8, i = 0..{ITERS - 1}")
    mismatch = None
    for S in SLOTS:
        for i in range(ITERS):
            for name, fn in fns.items():
                try:
                    got = fn(i, S)
                except Exception as e:  # noqa: BLE001
                    return Result(Verdict.WRONG, learner_error(e, f"{name}({i}, {S})"))
                want = getattr(ref, name)(i, S)
                if mismatch is None and (not isinstance(got, (tuple, list)) or tuple(got) != want):
                    mismatch = f"{name}({i}, {S}): got {got!r} expected {want}"

    policies = [("producer first", 0), ("consumer first", 0)] + [("random", seed) for seed in range(4)]
    for S in SLOTS:
        sub.progress(f"simulating a {S}-slot ring")
        for policy, seed in policies:
            try:
                simulate(fns["producer_wait"], fns["consumer_wait"], S, SIM_ITERS, policy, seed)
            except Failure as f:
                return Result(Verdict.WRONG, str(f),
                              details=[f"schedule: {policy}" + (f" (seed {seed})" if policy == "random" else "")]
                              + ([f"first difference from the reference: {mismatch}"] if mismatch else []))
    if mismatch:
        return Result(Verdict.WRONG, mismatch, details=[
            "the simulator found no deadlock or early read with these parities, but the exercise fixes the "
            "convention: slot i % S, the consumer's first wait uses parity 0"])
    return Result(Verdict.PASS, f"right for S = 1..8, i < {ITERS}; no deadlock or early read in simulation",
                  checked=[f"table S = 1..8 x i = 0..{ITERS - 1}",
                           f"simulated {SIM_ITERS} iterations x {len(policies)} schedules for each S"])
