"""ring.py - the phase bookkeeping of a warp-specialized ring: one producer, several consumers.

Your task: fill in empty_arrivals(), start() and advance(). Check with
    python practice/judge.py check ws_ring_phases

The ring has S slots; slot s has a buffer and two mbarriers:
  full[s]   initialized with 1 arrival: the producer's arrive.expect_tx, plus the TMA's bytes
  empty[s]  initialized with empty_arrivals(consumers): one elected thread of every consumer
            warpgroup arrives when its wgmma no longer reads the slot
  producer (one thread):  wait(empty[slot], phase); arrive.expect_tx(full[slot]); TMA -> slot
  consumer c (each one):  wait(full[slot], phase);  wgmma on slot;  arrive(empty[slot])
Both sides walk the ring with a state (slot, phase) and wait with
mbarrier.try_wait.parity(bar[slot], phase), which returns true once the phase of that parity
has completed; right after init the current phase is 0, so parity 1 names "the phase before"
and passes at once. Every consumer reads every tile (each computes its own rows of the output).
"""


def empty_arrivals(consumers):
    """The arrival count empty[s] is initialized with, for `consumers` consumer warpgroups."""
    raise NotImplementedError("empty_arrivals: who must be done with a slot before it may be refilled?")


def start(role):
    """(slot, phase) of iteration 0, for role "producer" (waits on empty) or "consumer" (on full)."""
    raise NotImplementedError("start: which slot first, and which parity passes (or blocks) on a fresh barrier?")


def advance(state, S):
    """The (slot, phase) of the next iteration, from this iteration's state, in an S-slot ring."""
    raise NotImplementedError("advance: next slot; when does the phase flip?")
