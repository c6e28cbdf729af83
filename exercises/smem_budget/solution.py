"""budget.py - how much shared memory does an S-stage GEMM pipeline take, and how many blocks fit on a Hopper SM?

A pipeline keeps `stages` copies of an A tile (BM x BK) and a B tile (BK x BN) in shared memory.
Count its bytes, then find how many such blocks one SM holds at once under the real Hopper
limits (README.md lists them, with where each number comes from).
Check it: python practice/judge.py check smem_budget
"""

KB = 1024

# Compute capability 9.0 (H100 and H200 share it): the numbers README.md cites.
HOPPER = {
    "smem_per_sm": 228 * KB,            # largest shared-memory carveout of an SM
    "smem_per_block": 227 * KB,         # the most one block may ask for (after opting in above 48 KB)
    "smem_reserved_per_block": 1 * KB,  # the system's own, added to every block
    "smem_unit": 128,                   # shared memory is allocated in 128-byte units
    "regs_per_sm": 64 * KB,             # 65536 32-bit registers, in 4 equal quarters (sub-partitions)
    "sub_partitions": 4,
    "reg_unit": 256,                    # registers are allocated per warp, in units of 256
    "regs_per_thread": 255,
    "threads_per_block": 1024,
    "warps_per_sm": 64,                 # 2048 threads
    "blocks_per_sm": 32,
}
GPUS = {"H100": HOPPER, "H200": HOPPER}


def stage_bytes(BM, BN, BK, elem_bytes=4):
    """Bytes of one pipeline stage: an A tile of BM x BK and a B tile of BK x BN elements."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("stage_bytes: one A tile (BM x BK) plus one B tile (BK x BN), in bytes")
    return (BM * BK + BK * BN) * elem_bytes
    # END SOLUTION


def pipeline_bytes(BM, BN, BK, stages, elem_bytes=4):
    """Bytes of shared memory for `stages` stages."""
    # BEGIN SOLUTION
    #> raise NotImplementedError("pipeline_bytes: every stage holds its own A and B tiles")
    return stages * stage_bytes(BM, BN, BK, elem_bytes)
    # END SOLUTION


def blocks_per_sm(smem_per_block, threads_per_block, regs_per_thread, gpu="H100"):
    """How many blocks of this kernel one SM holds at once (0: a block cannot launch at all)."""
    # BEGIN SOLUTION
    #> raise NotImplementedError(
    #>     "blocks_per_sm: the smallest of four limits (blocks, warps, shared memory, registers); "
    #>     "README.md gives the rules and the numbers")
    if gpu not in GPUS:
        raise ValueError(f"gpu must be one of {sorted(GPUS)}, got {gpu!r}")
    L = GPUS[gpu]
    if smem_per_block < 0 or threads_per_block < 1 or regs_per_thread < 0:
        raise ValueError("need smem_per_block >= 0, threads_per_block >= 1, regs_per_thread >= 0")
    if (threads_per_block > L["threads_per_block"] or regs_per_thread > L["regs_per_thread"]
            or smem_per_block > L["smem_per_block"]):
        return 0
    warps = -(-threads_per_block // 32)                  # a partial warp still takes a whole warp
    by_warps = L["warps_per_sm"] // warps
    # shared memory: the request plus the reserved 1 KB, rounded up to the allocation unit
    unit = L["smem_unit"]
    smem = -(-(smem_per_block + L["smem_reserved_per_block"]) // unit) * unit
    by_smem = L["smem_per_sm"] // smem
    # registers: per warp, rounded up to 256; a warp lives in one quarter of the register file
    by_regs = L["blocks_per_sm"]
    if regs_per_thread:
        unit = L["reg_unit"]
        per_warp = -(-(regs_per_thread * 32) // unit) * unit
        warps_per_quarter = (L["regs_per_sm"] // L["sub_partitions"]) // per_warp
        by_regs = warps_per_quarter * L["sub_partitions"] // warps
    return min(L["blocks_per_sm"], by_warps, by_smem, by_regs)
    # END SOLUTION
