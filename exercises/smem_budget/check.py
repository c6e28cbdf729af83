"""check.py - the grader of smem_budget: the learner's budget.py against solution.py.

The judge runs it in a child process:  python practice/judge.py check smem_budget
or, from Python,  judge.grading.grade.check("smem_budget", "budget.py").
Phases: stage_bytes and pipeline_bytes (the seed SGEMM's 128x128x8 fp32 tiles first);
blocks_per_sm on cases that each bind a different Hopper limit, for H100 and H200; an
unknown gpu raises ValueError. solution.py's blocks_per_sm agrees with the CUDA toolkit's own
occupancy calculator (cuda_occupancy.h, cudaOccMaxActiveBlocksPerMultiprocessor, compute
capability 9.0, opt-in shared memory) on these cases and on 3000 random ones.
"""
from __future__ import annotations

from pathlib import Path

from judge.grading.grade import Result, Verdict, learner_error

HERE = Path(__file__).resolve().parent
KB = 1024

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


class _Fail(Exception):
    def __init__(self, message, details=()):
        super().__init__(message)
        self.message, self.details = message, list(details)



def _call(fn, text, *args, **kw):
    try:
        return fn(*args, **kw)
    except Exception as e:  # noqa: BLE001 - whatever the learner's code raises is the answer
        raise _Fail(learner_error(e, text)) from None


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _limits(ref, smem, threads, regs) -> str:
    """Each limit on its own, for a failure message."""
    L = ref.HOPPER
    warps = -(-threads // 32)
    alloc = -(-(smem + L["smem_reserved_per_block"]) // L["smem_unit"]) * L["smem_unit"]
    parts = [f"block cap {L['blocks_per_sm']}",
             f"warps {L['warps_per_sm']} // {warps} = {L['warps_per_sm'] // warps}",
             f"shared {L['smem_per_sm']} // {alloc} (request + 1 KB reserved, in 128 B units) = "
             f"{L['smem_per_sm'] // alloc}"]
    if regs:
        per_warp = -(-regs * 32 // L["reg_unit"]) * L["reg_unit"]
        q = (L["regs_per_sm"] // L["sub_partitions"]) // per_warp
        parts.append(f"registers: {per_warp} per warp, {q} warps per quarter, 4 x {q} // {warps} = "
                     f"{4 * q // warps}")
    return "limits: " + "; ".join(parts)


def _check_bytes(mod, ref):
    for BM, BN, BK, eb, what in STAGES:
        text = f"stage_bytes({BM}, {BN}, {BK}, elem_bytes={eb})"
        got, want = _call(mod.stage_bytes, text, BM, BN, BK, elem_bytes=eb), ref.stage_bytes(BM, BN, BK, eb)
        if got != want:
            raise _Fail(f"{text} returned {got!r}, expected {want} ({what})",
                        [f"a stage holds an A tile of {BM}x{BK} and a B tile of {BK}x{BN} elements, "
                         f"{eb} byte(s) each"])
    for BM, BN, BK, s, eb in PIPES:
        text = f"pipeline_bytes({BM}, {BN}, {BK}, {s}, elem_bytes={eb})"
        got, want = _call(mod.pipeline_bytes, text, BM, BN, BK, s, elem_bytes=eb), ref.pipeline_bytes(BM, BN, BK, s, eb)
        if got != want:
            raise _Fail(f"{text} returned {got!r}, expected {want} ({s} stages of "
                        f"{ref.stage_bytes(BM, BN, BK, eb)} bytes)")


def _check_blocks(mod, ref, gpu):
    for smem, threads, regs, what in BLOCKS:
        text = f"blocks_per_sm({smem}, {threads}, {regs}, gpu={gpu!r})"
        got = _call(mod.blocks_per_sm, text, smem, threads, regs, gpu=gpu)
        want = ref.blocks_per_sm(smem, threads, regs, gpu=gpu)
        if not _is_int(got) or got != want:
            raise _Fail(f"{text} returned {got!r}, expected {want} ({what})",
                        [_limits(ref, smem, threads, regs)] if want else
                        ["a block over any per-block limit (227 KB shared, 1024 threads, 255 registers "
                         "per thread, 64K registers) cannot launch: 0 blocks"])


def check(sub) -> Result:
    sub.progress("loading budget.py")
    mod = sub.learner_module("stage_bytes", "pipeline_bytes", "blocks_per_sm")
    ref = sub.exercise.reference()
    checked = []
    try:
        sub.progress("stage_bytes and pipeline_bytes")
        _check_bytes(mod, ref)
        checked.append(f"{len(STAGES)} stage sizes and {len(PIPES)} pipelines (8 KB per stage, 16/24/32 KB "
                       f"for 2/3/4 stages of the chapter's SGEMM)")
        for gpu in ("H100", "H200"):
            sub.progress(f"blocks_per_sm on {gpu}")
            _check_blocks(mod, ref, gpu)
        checked.append(f"{len(BLOCKS)} occupancy cases on H100 and H200 (shared memory, reserved 1 KB, "
                       f"allocation units, warps, registers, block cap, launch limits)")
        sub.progress("an unknown gpu")
        try:
            got = mod.blocks_per_sm(8 * KB, 256, 64, gpu="A100")
        except ValueError:
            pass
        except Exception as e:  # noqa: BLE001
            raise _Fail("blocks_per_sm(..., gpu='A100') should raise ValueError; "
                        + learner_error(e, "it")) from None
        else:
            raise _Fail(f"blocks_per_sm(..., gpu='A100') returned {got!r}: it should raise ValueError "
                        f"(only H100 and H200 are described)")
        checked.append("an unknown gpu raises ValueError")
    except _Fail as f:
        return Result(Verdict.WRONG, f.message, details=f.details, checked=checked)
    return Result(Verdict.PASS, "shared-memory budget and blocks per SM agree with the Hopper limits",
                  checked=checked)
