"""check.py - the grader of smem_budget: python practice/judge.py check smem_budget

The three functions of the statement are called directly (judge.grading.cpu_flow) and compared with
the rules below (the statement's table: compute capability 9.0, from the CUDA C++ Programming Guide
and cuda_occupancy.h). Listed cases: the chapter's SGEMM tiles and other shapes and element sizes;
blocks_per_sm on cases that each bind a different Hopper limit, for H100 and H200 and with the
default gpu; an unknown gpu raises ValueError. Then shapes, stages, element sizes and kernels drawn
at random each run (shared memory up to past 227 KB, 1 to 1100 threads, 0 to 260 registers).
These rules agree with the toolkit's occupancy calculator (cudaOccMaxActiveBlocksPerMultiprocessor,
cc 9.0, opt-in shared memory) on the listed cases and on random ones.
"""
from __future__ import annotations

from hypothesis import strategies as st

from judge.grading import cpu_flow as flow

KB = 1024
HOPPER = {"smem_per_sm": 228 * KB, "smem_per_block": 227 * KB, "smem_reserved_per_block": 1 * KB, "smem_unit": 128,
          "regs_per_sm": 64 * KB, "sub_partitions": 4, "reg_unit": 256, "regs_per_thread": 255,
          "threads_per_block": 1024, "warps_per_sm": 64, "blocks_per_sm": 32}
GPUS = ("H100", "H200")

# (BM, BN, BK, elem_bytes, what)
STAGES = [
    (128, 128, 8, 4, "the 128x128x8 fp32 tiles of the chapter's SGEMM"),
    (128, 64, 32, 2, "BM != BN, bf16"),
    (256, 128, 64, 2, "a wide bf16 tile, BM = 2 BN"),
    (64, 256, 16, 4, "BN = 4 BM, fp32"),
    (128, 256, 64, 1, "8-bit elements"),
]
PIPES = [(128, 128, 8, s, 4) for s in (2, 3, 4)] + [(128, 256, 64, 4, 2), (256, 128, 32, 5, 2)]
# (smem_per_block, threads_per_block, regs_per_thread, what binds)
BLOCKS = [
    (24 * KB, 256, 128, "the chapter's 3-stage SGEMM at 128 registers: registers bind"),
    (24 * KB, 256, 64, "the same at 64 registers: registers still bind"),
    (32 * KB, 128, 32, "32 KB: the 1 KB reserved per block costs a block"),
    (64 * KB, 128, 32, "64 KB: more than the 48 KB a block gets without opting in"),
    (57 * KB, 128, 32, "57 KB: the reserved 1 KB again"),
    (100 * KB, 128, 32, "100 KB"),
    (227 * KB, 128, 32, "227 KB: the most a block may use"),
    (227 * KB + 1, 128, 32, "one byte over 227 KB: cannot launch"),
    (32276, 128, 32, "32276 B: the 128-byte allocation unit costs a block"),
    (0, 32, 16, "tiny blocks: the 32-blocks-per-SM cap"),
    (0, 1024, 32, "1024 threads: the 2048-thread (64-warp) limit"),
    (0, 1000, 32, "1000 threads: a partial warp still takes a warp"),
    (0, 1024, 64, "1024 threads at 64 registers: the whole register file"),
    (0, 1024, 65, "1024 threads at 65 registers: over the register file, cannot launch"),
    (0, 32, 100, "100 registers: 3200 per warp rounds up to 3328"),
    (0, 96, 40, "3 warps per block at 40 registers"),
    (0, 256, 255, "255 registers per thread: the most allowed"),
    (0, 256, 256, "256 registers per thread: more than 255, cannot launch"),
    (0, 1025, 16, "1025 threads: more than 1024 per block, cannot launch"),
]


# ------------------------------------------------------------------ the reference (the statement's rules)
def stage_bytes(BM, BN, BK, elem_bytes=4):
    return (BM * BK + BK * BN) * elem_bytes


def pipeline_bytes(BM, BN, BK, stages, elem_bytes=4):
    return stages * stage_bytes(BM, BN, BK, elem_bytes)


def _counts(smem, threads, regs):
    """Each limit's count of blocks for a block that can launch."""
    L = HOPPER
    warps = -(-threads // 32)                                     # a partial warp takes a whole warp
    alloc = -(-(smem + L["smem_reserved_per_block"]) // L["smem_unit"]) * L["smem_unit"]
    out = {"cap": L["blocks_per_sm"], "warps": L["warps_per_sm"] // warps, "shared": L["smem_per_sm"] // alloc}
    if regs:
        per_warp = -(-regs * 32 // L["reg_unit"]) * L["reg_unit"]
        out["registers"] = (L["regs_per_sm"] // L["sub_partitions"]) // per_warp * L["sub_partitions"] // warps
    return out


def blocks_per_sm(smem_per_block, threads_per_block, regs_per_thread, gpu="H100"):
    if gpu not in GPUS:
        raise ValueError(f"gpu must be one of {GPUS}, got {gpu!r}")
    L = HOPPER
    if (threads_per_block > L["threads_per_block"] or regs_per_thread > L["regs_per_thread"]
            or smem_per_block > L["smem_per_block"]):
        return 0
    return min(_counts(smem_per_block, threads_per_block, regs_per_thread).values())


# ------------------------------------------------------------------ explaining
def explain_stage(call, got, want):
    BM, BN, BK = call.args[:3]
    eb = call.args[3] if len(call.args) > 3 else call.kwargs.get("elem_bytes", 4)
    return (f"a stage holds an A tile of {BM}x{BK} and a B tile of {BK}x{BN} elements, {eb} byte(s) each"
            + (" (elem_bytes defaults to 4)" if len(call.args) < 4 and "elem_bytes" not in call.kwargs else ""))


def explain_pipe(call, got, want):
    BM, BN, BK, s = call.args[:4]
    eb = call.args[4] if len(call.args) > 4 else call.kwargs.get("elem_bytes", 4)
    return f"{s} stages of {stage_bytes(BM, BN, BK, eb)} bytes each"


def explain_blocks(call, got, want):
    smem, threads, regs = call.args[:3]
    if want == 0:
        return ("a block over any per-block limit (227 KB shared, 1024 threads, 255 registers per thread) cannot "
                "launch: 0 blocks; so can a block whose registers do not fit the SM (the register count is 0)")
    L, warps = HOPPER, -(-threads // 32)
    alloc = -(-(smem + L["smem_reserved_per_block"]) // L["smem_unit"]) * L["smem_unit"]
    parts = [f"block cap {L['blocks_per_sm']}", f"warps {L['warps_per_sm']} // {warps} = {L['warps_per_sm'] // warps}",
             f"shared {L['smem_per_sm']} // {alloc} (request + 1 KB reserved, in 128 B units) = "
             f"{L['smem_per_sm'] // alloc}"]
    if regs:
        per_warp = -(-regs * 32 // L["reg_unit"]) * L["reg_unit"]
        q = (L["regs_per_sm"] // L["sub_partitions"]) // per_warp
        parts.append(f"registers: {per_warp} per warp, {q} warps per quarter, 4 x {q} // {warps} = {4 * q // warps}")
    return "limits: " + "; ".join(parts)


# ------------------------------------------------------------------ inputs
tile = st.sampled_from([8, 16, 32, 48, 64, 96, 128, 192, 256])
elem = st.sampled_from([1, 2, 4, 8])


@st.composite
def stage_args(draw, stages=False):
    args = [draw(tile), draw(tile), draw(st.sampled_from([4, 8, 16, 32, 64, 128]))]
    if stages:
        args.append(draw(st.integers(1, 8)))
    return flow.Args(*args, elem_bytes=draw(elem)) if draw(st.booleans()) else flow.Args(*args)


@st.composite
def kernels(draw):
    smem = draw(st.one_of(st.integers(0, 229 * KB), st.sampled_from([0, 48 * KB, 227 * KB, 227 * KB + 1]),
                          st.integers(0, 64).map(lambda k: k * 3584)))
    threads = draw(st.one_of(st.integers(1, 1100), st.integers(1, 128), st.sampled_from([32, 64, 128, 256, 512, 1024])))
    regs = draw(st.one_of(st.integers(0, 260), st.sampled_from([32, 40, 64, 72, 96, 128, 168, 255])))
    which = draw(st.sampled_from(["default", "H100", "H200"]))
    return flow.Args(smem, threads, regs) if which == "default" else flow.Args(smem, threads, regs, gpu=which)


def check(sub):
    block_edges = [flow.Edge(flow.Args(s, t, r, gpu=g), what) for g in GPUS for s, t, r, what in BLOCKS]
    block_edges += [flow.Edge(flow.Args(24 * KB, 256, 128), "the default gpu"),
                    flow.Edge(flow.Args(8 * KB, 256, 64, gpu="A100"), "an unknown gpu raises ValueError")]
    functions = [
        flow.Function("stage_bytes", reference=stage_bytes, args=stage_args(),
                      edges=[flow.Edge(flow.Args(BM, BN, BK, elem_bytes=eb), what) for BM, BN, BK, eb, what in STAGES]
                      + [flow.Edge((128, 128, 8), "elem_bytes left at its default, 4")],
                      explain=explain_stage),
        flow.Function("pipeline_bytes", reference=pipeline_bytes, args=stage_args(stages=True),
                      edges=[flow.Edge(flow.Args(BM, BN, BK, s, elem_bytes=eb)) for BM, BN, BK, s, eb in PIPES],
                      explain=explain_pipe),
        flow.Function("blocks_per_sm", reference=blocks_per_sm, args=kernels(), edges=block_edges, raises=ValueError,
                      explain=explain_blocks),
    ]
    return flow.run(sub, functions, checked=["the limits of compute capability 9.0 (README's table)"])
