"""Grader of barrier_phases: python practice/judge.py check barrier_phases

1. Both functions are called directly (judge.grading.cpu_flow) and compared with the convention of
   the statement (the reference below): S = 1..8 at the first laps and around lap changes, then
   (i, S) drawn at random each run (S up to 16, i up to 5000).
2. When an answer differs, a simulator tells what it does on the GPU: a producer, a consumer and
   a TMA engine run over a model of mbarriers (phase counter, pending arrivals, transaction bytes;
   try_wait.parity as the PTX ISA defines it) under several schedules, with the learner's slots and
   parities. It reports a deadlock, a consumer reading a slot before its TMA landed, or a TMA
   overwriting a slot the consumer has not released; that story becomes the message, and the
   first differing call follows it.
"""
from hypothesis import strategies as st

from judge.grading import cpu_flow as flow
from judge.grading.result import Verdict
import random

from judge.grading.learner_process import Ended
from judge.grading.submission import learner_error

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



def consumer_wait(i, S):
    """Lap k = i // S of slot i % S ends phase k of full[slot]: parity k % 2."""
    return i % S, (i // S) % 2


def producer_wait(i, S):
    """Lap k needs the consumer's release of lap k - 1 (phase k - 1 of empty[slot]); lap 0: 'phase -1', parity 1."""
    return i % S, (i // S + 1) % 2


def explain(name):
    def lines(call, got, want):
        i, S = call.args
        lap = i // S
        if name == "consumer_wait":
            return f"iteration {i} is lap {lap} of slot {i % S}: it waits for phase {lap} of full[{i % S}], parity {lap % 2}"
        return (f"iteration {i} is lap {lap} of slot {i % S}: it needs the consumer's release of lap {lap - 1}, "
                f"phase {lap - 1} of empty[{i % S}], parity {(lap + 1) % 2}"
                + (" (on lap 0, 'phase -1': the phase before the first counts as complete)" if lap == 0 else ""))
    return lines


POLICIES = [("producer first", 0), ("consumer first", 0)] + [("random", seed) for seed in range(4)]


def _story(result, failed, run):
    """On a wrong answer, what these parities do in a ring: the simulator's story leads the message."""
    if failed is None or result.verdict != Verdict.WRONG:
        return
    sizes = [failed.call.args[1]] + [S for S in SLOTS if S != failed.call.args[1]]
    for S in sizes:
        if not 1 <= S <= 16:
            continue
        for policy, seed in POLICIES:
            try:
                simulate(run.mod.producer_wait, run.mod.consumer_wait, S, SIM_ITERS, policy, seed)
            except Ended:                 # the learner's process ended while telling the story: keep the WRONG
                return
            except Failure as f:
                result.details[:0] = [f"schedule: {policy}" + (f" (seed {seed})" if policy == "random" else ""),
                                      f"first difference from the convention: {result.message}"]
                result.message = str(f)
                return
    result.details.insert(0, "the simulator found no deadlock or early read with these parities, but the exercise "
                             "fixes the convention: slot i % S, the consumer's first wait uses parity 0")


def check(sub):
    edges = [flow.Edge((i, S)) for S in SLOTS for i in sorted({*range(3 * S), 4 * S - 1, 4 * S, 100})]
    args = st.tuples(st.integers(0, 5000), st.integers(1, 16))
    functions = [flow.Function(name, reference=ref, args=args, edges=edges, explain=explain(name))
                 for name, ref in (("consumer_wait", consumer_wait), ("producer_wait", producer_wait))]
    return flow.run(sub, functions, after=_story,
                    checked=["the convention: slot i % S, parity from the lap; a ring simulated on a wrong answer"])
