"""dsmem.py - distributed shared memory: what a mapped address points at, and where a cluster
barrier is needed around the accesses a block makes to its peers' shared memory.

Your task: fill in the four functions. Check with
    python practice/judge.py check dsmem_addressing

ADDRESSES. On the H200, the 32-bit .shared::cluster address of byte `offset` of the shared memory
of the block of cluster rank `rank` is (rank << 24) | offset. A block's addresses of its OWN shared
memory carry its own rank in bits 24-31 already (the SASS builds them with LEA over SR_CgaCtaId,
shift 0x18), and mapa REPLACES that byte with the target rank (PRMT with selector 0x654):
mapa(address, rank) = (rank << 24) | (address & 0xFFFFFF). OR-ing the rank in, (rank << 24) | address,
is right only in the block of rank 0. Shared memory per block is below 2^24 bytes.

PROGRAMS. Every block of the cluster runs the same list of steps (SPMD). A step is a tuple:
    ("st", where, var)  store       ("ld", where, var)  load      ("red", where, var) atomic add
    ("sync",)           cluster barrier (barrier.cluster.arrive.release + wait.acquire)
where is "own" (this block's copy of var) or "peer" (another block's copy, through DSMEM).
After the last step every block exits.
"""

RANK_SHIFT = 24


def encode(rank, offset):
    """The .shared::cluster address of byte `offset` in the block of rank `rank`."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("encode: the rank goes in the top byte")
    return (rank << RANK_SHIFT) | offset
    # END SOLUTION


def decode(address):
    """(rank, offset) that a .shared::cluster address refers to."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("decode: split the address into the top byte and the rest")
    return address >> RANK_SHIFT, address & ((1 << RANK_SHIFT) - 1)
    # END SOLUTION


def mapa(address, rank):
    """The same byte as `address` (a .shared::cluster address in any block) in the block of `rank`."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("mapa: replace the top byte, do not OR into it")
    return (rank << RANK_SHIFT) | (address & ((1 << RANK_SHIFT) - 1))
    # END SOLUTION


def barriers_needed(program):
    """For each step that touches a PEER's shared memory, which cluster barriers it needs and lacks:
    {step index: {"before"} | {"after"} | {"before", "after"}}; steps that need none are left out.

    "before": a barrier must separate this step from something EARLIER in the program; "after":
    from something LATER. The rules, for a peer step in the segment between two barriers:
      - the peer may not have started yet if no barrier comes before the step (its shared memory
        does not exist yet): "before";
      - the peer may have exited if no barrier comes after the step: "after";
      - the peer runs the same program: if the peer's own step on the same var in the SAME segment
        conflicts with this one (at least one of the two writes; two atomic adds do not conflict),
        nothing orders them: "before" if that own step comes earlier in the list, "after" if later.
    """
    # BEGIN SOLUTION
    #> raise NotImplementedError("barriers_needed: cut the program into segments at the barriers")
    seg, segments = 0, []
    for step in program:
        if step[0] == "sync":
            seg += 1
        segments.append(seg)
    last = seg
    writes = {"st", "red"}

    def conflict(a, b):
        if a == "red" and b == "red":
            return False
        return a in writes or b in writes

    need = {}
    for i, step in enumerate(program):
        if step[0] == "sync" or step[1] != "peer":
            continue
        s = set()
        if segments[i] == 0:
            s.add("before")
        if segments[i] == last:
            s.add("after")
        for j, other in enumerate(program):
            if other[0] == "sync" or other[1] != "own" or other[2] != step[2] or segments[j] != segments[i]:
                continue
            if conflict(step[0], other[0]):
                s.add("before" if j < i else "after")
        if s:
            need[i] = s
    return need
    # END SOLUTION
