"""judge.model - a CPU model of the Hopper asynchronous machine that runs a kernel's own PTX.

    from judge.gpu import build
    from judge import model
    b = build.compile("exercises/cp_async_sgemm/solution.cu")
    rep = model.run(b, "sgemm_pipelined", grid=(1, 1, 1), block=(256, 1, 1),
                    args=(np.int32(M), np.int32(N), np.int32(K), A, B, C), shared_bytes=3 * 8192)
    rep.counts["cp.async"], rep.counts["smem_fill.st.shared.bytes"]   # who filled shared memory
    # raises model.Violation (WRONG), model.Hang (HANG), model.Unsupported (cannot judge)

Try it: .venv/bin/python -m pytest tests/model/test_model.py tests/chapters/ch01_cp_async/test_on_model.py tests/chapters/ch02_tma/test_on_model.py tests/chapters/ch03_clusters/test_on_model.py tests/chapters/ch04_wgmma/test_on_model.py -q
        .venv/bin/python -m pytest tests/model/test_model_ops_alu.py tests/model/test_model_ops_memory.py \
            tests/model/test_model_ops_async.py tests/model/test_model_rules.py tests/model/test_model_inventory.py -q

Layout (each module opens with what it does):
    ptx.py        the one PTX reader: kernels, instructions, operands, source lines
    state.py      Machine: memory regions, parameters, shared memory, registers, addresses, clocks
    checks.py     the rules (RULES: rule id -> PTX ISA section), happens-before, race checks, fail()
    completion.py asynchronous completions: cp.async landing, mbarrier phases (judge.hw.mbarrier), stores
    scheduler.py  the exec loop, blocking, barriers' release, exits, hangs
    tensormaps.py tensor maps as objects in memory (their 128 bytes are an identity, not CUtensorMap's
                  layout) and the tensormap proxy's release / acquire
    registry.py   PTX instruction name -> the family's factory (longest dotted prefix wins)
    ops/          one module per instruction family (alu, convert, memory, control, barriers, warp,
                  cluster, cp_async, mbarrier, bulk, wgmma, tcgen05, tensormap, ...)
    replay.py     a run drawn as the course's pipeline timeline
    errors.py     Violation (WRONG), Hang (HANG), Unsupported (no verdict)

What runs: the PTX of the very compile that is graded (Build.ptx; NVRTC, -lineinfo), so
`__pipeline_*`, `cuda::pipeline`, cooperative groups, `cuda::ptx` and inline asm all arrive as
the same PTX instructions, and `#ifdef JUDGE_TRACE` changes nothing. Every thread of a block
(every block of a cluster together) is a lane of NumPy arrays with its own PC; the runnable
threads at the lowest PC execute one instruction together (predicates and divergence are masks).
Blocks of different clusters run one after another. Arguments: NumPy arrays are global memory
(outputs are written back in place), NumPy scalars, and judge.hw.tma TensorMap/TensorMapSpec
objects for `const __grid_constant__` tensor-map parameters (build them over the NumPy arrays
with judge.hw.tma.tensor_map_spec: no driver is needed).

The rules, each with the PTX ISA rule it enforces (and where the model is harsher than an H200):

1. cp.async (ca/cg; 4, 8, 16 bytes; src-size zero fill). PTX: the writes of a cp.async are
   performed asynchronously and are made visible to the executing thread only by
   cp.async.wait_group / wait_all (or an mbarrier via cp.async.mbarrier.arrive); groups complete
   in commit order per thread. MODEL: a group's bytes land at the last legal moment, when a wait of
   the issuing thread covers it; until then the bytes are poison (NaN bits) and a read is a
   Violation naming the group and the wait ("cp.async-wait"). Harsher than the hardware, where
   the copy has usually landed long before.
2. Visibility to other threads. PTX memory model: a write by thread A is visible to thread B
   only if it happens-before B's read, e.g. through a bar.sync / barrier.sync both execute after
   A's wait. MODEL: vector clocks over bar.sync/barrier.sync(.aligned)/bar.arrive, bar.warp.sync,
   barrier.cluster.arrive/wait and mbarrier arrive -> wait; a read of bytes landed by another
   thread's wait without such an order is a Violation ("cp.async-visibility").
3. Buffer reuse (write-after-read race). A cp.async / TMA load into shared memory that another
   thread read with no barrier (or mbarrier arrive -> wait) ordering that read before the copy
   is a Violation ("async-overwrite-race"). The copying thread must be ordered after each warp's last
   read of the word: for another warp, after one lane of it (MODEL, lenient: a warp that hands its
   buffer back through one elected lane's arrival without __syncwarp() passes, though the PTX memory
   model orders only that lane); for its own warp, after the lanes that read it (a __syncwarp() between
   their reads and the copy), unless the copying thread alone read the word.
4. mbarrier (init, arrive, arrive.expect_tx, expect_tx, complete_tx, arrive_drop, try_wait /
   test_wait with parity or state, inval), with the phase rules of judge.hw.mbarrier. PTX: a phase completes when its pending arrival count
   and its tx-count are both zero; then the parity flips and the counts reset. MODEL: exact counts,
   phases and tx-counts; a TMA load's bytes land only when its phase completes, in a scrambled
   order; before that they read as poison ("tma-read-before-complete"), and a thread that did not
   observe the phase (nor synchronize with one that did) may not read them ("tma-visibility").
   More arrivals than the count while bytes are missing is "mbarrier-arrivals". mbarrier.init on a
   live mbarrier (several threads initializing one, or initializing it again without mbarrier.inval) is
   undefined (PTX ISA, mbarrier.init): "mbarrier-reinit". A failed
   try_wait/test_wait sleeps the thread until the phase changes (test_wait is non-blocking on the
   hardware; a spin loop around it behaves the same).
5. cp.async.mbarrier.arrive(.noinc): the arrive-on fires after all prior cp.async of the thread
   complete; MODEL: as late as possible (when a thread waits on that mbarrier, or nothing else can
   run).
6. TMA (cp.async.bulk.tensor 1-5D, tile mode, multicast::cluster with ctaMask) with the tensor
   map's semantics from judge/hw/tma.py: boxes (inner first), elementStrides, out-of-bounds fill
   (zero or NaN, counted in the tx bytes), swizzle 32/64/128B on the shared address bits.
   1-D cp.async.bulk global<->shared too; cp.reduce.async.bulk.tensor (add, min, max, inc, dec, and,
   or, xor) combines with global memory when its read completes.
6b. Tensor maps edited on the device (ops/tensormap.py, judge/model/tensormaps.py): a map is an object
   whose identity is its 128 bytes, so ld/st and tensormap.cp_fenceproxy copy it and
   tensormap.replace.tile.<field> makes a new object with one field changed (the CUtensorMap byte
   layout is undocumented and never built). PTX: a map written through the generic proxy is seen by
   a TMA only after the writer's fence.proxy.tensormap::generic.release (or cp_fenceproxy's .release)
   and the issuing thread's .acquire [map], 128, in that happens-before order; MODEL: a TMA through a
   device-written map without them is "tensormap-proxy-fence"; bytes that are not one whole map are
   "tensormap-object"; a TMA map operand in shared memory is "tensormap-space". Kernel parameters need
   no fence. run(memory=...) adds arrays the kernel reaches through addresses it reads from memory.
6c. Tensor maps the host wrote into global memory (cudaMemcpy of a CUtensorMap, the kernel taking a
   `const CUtensorMap*`): pass model.HostMaps(spec, ...) for that pointer. The launch orders the host's
   write, so no release is needed, but the Programming Guide asks the issuing thread to acquire the map
   (fence.proxy.tensormap::generic.acquire [map], 128) before its TMA: without it, "tensormap-proxy-fence".
7. fence.proxy.async. PTX: generic-proxy writes to shared memory are not visible to the async
   proxy until a proxy fence. MODEL: a TMA/bulk store that reads a word written by st.shared
   is a Violation ("proxy-fence") unless the writing thread executed fence.proxy.async after the
   write AND (for another thread's store) a barrier orders the fence before the store
   ("proxy-fence-barrier").
8. Bulk async-groups (cp.async.bulk.commit_group, wait_group, wait_group.read). MODEL: a store reads
   its shared bytes at the latest legal point (the covering wait); a write into them before that is
   "async-read-overwritten". Bulk async-groups are per thread: a wait covers only the groups its own
   thread committed, so another thread's write into those bytes must happen after the storing thread's
   wait (a barrier after it); a thread that runs wait_group without having committed the store waits for
   nothing, and its write is "async-read-overwritten" too; a thread that exits while its store may still read shared memory is
   "exit-before-bulk-read" (the block's shared memory is released at exit).
9. wgmma (m64nNk16 .bf16/.f16 and m64nNk32 .e4m3/.e5m2 operands from shared-memory descriptors,
   .f32 accumulators, K-major or, for .bf16/.f16, MN-major; m64nNk16 .bf16/.f16 with A's fragment in
   registers; operand addresses and the accumulator fragment from judge/hw/wgmma.py). PTX: wgmma.fence
   before the first mma_async and after register writes to its accumulators or to A's registers
   ("wgmma-fence"); operands are read through the async proxy (generic stores need fence.proxy.async:
   "proxy-fence"); accumulators, and A's registers, may not be touched until wgmma.wait_group covers
   the group ("wgmma-accumulator"); all 128 threads of the warpgroup execute each wgmma.* together
   ("wgmma-aligned"). MODEL: the operand bytes count as being read until the covering wait, and the
   wait is one warpgroup-wide event.
10. Clusters (an address mapa gives for the block's own rank is its own shared memory: a local access, never
   a peer's): all blocks of a cluster run together (__cluster_dims__ / .reqnctapercluster decides the
   shape); barrier.cluster.arrive/wait, mapa, ld/st.shared::cluster (DSMEM), multicast TMA with
   ctaMask (each destination block's mbarrier receives its bytes). PTX ISA, barrier.cluster: only
   the default (.release) arrive orders the arriving thread's memory accesses before the waiters'
   (.acquire) later ones; an arrive.relaxed counts but orders nothing. Writes (st/atom/red) into
   another block's shared memory are counted ("dsmem.peer"): the feature carrying the data.
10b. tcgen05 and tensor memory (sm_100a; judge/model/ops/tcgen05.py, state in judge.model.tensor_memory):
   128 lanes x 512 columns per CTA; alloc/dealloc/relinquish by whole warps, mma and commit per thread,
   an MMA's result landing at its commit's mbarrier arrival (as late as allowed; a commit covers every
   earlier MMA of its thread, also those an earlier commit covered), ld/st in the warp's
   lane quarter with warp-uniform addresses, registers usable after tcgen05.wait::ld, fences around
   barriers, leaks at exit. Values read with tcgen05.ld are marked, and global stores of marked values
   are counted ("gstore.from.tcgen05.ld.bytes" of "gstore.bytes"). tcgen05.cp (judge/model/ops/tcgen05_cp.py)
   copies shared memory into tensor memory, tracked by tcgen05.commit like an MMA; the block-scaled kinds
   (mxf8f6f4, mxf4, mxf4nvf4) read their scales from tensor memory (judge.model.block_scale).
   CTA pairs (.cta_group::2): the alloc made by one warp in each CTA of the pair, together; the M = 256
   MMA reading both CTAs' shared memory and writing both tensor memories; multicast commits; TMA loads
   counted on the peer's mbarrier.
10c. Cluster launch control (sm_100; ops/clc.py): clusterlaunchcontrol.try_cancel (.multicast::cluster::all
   too) succeeds while a cluster of the launch has not started: the model, which runs clusters one
   after another in its own order, takes one (drawn with the seed) out of the launch - it never runs,
   report.cancelled names it - and writes the 16-byte response like a TMA load: poison until the
   mbarrier phase completes, its 16-byte complete-tx delivered as late as allowed (when a thread waits on
   that mbarrier, or nothing else can run). query_cancel (is_canceled, get_first_ctaid) decodes it from a
   .b128 register (mov.b128); anything else is "clc-response"; asking again after a block saw a request
   fail is "clc-after-failure".
11. HANG: the moment every live thread is blocked (bar.sync that cannot complete, an mbarrier phase
   that can never complete, a cluster barrier), Hang carries the wait-for graph: who waits on
   which barrier / mbarrier and parity, how many arrivals and tx bytes are missing. A kernel that
   runs past `budget` instruction groups (default 100000 per cluster, about 2 s of CPU) is a Hang
   too ("a loop that never ends"): size the model's cases so a correct run stays far below it.
   Clusters run one after another, so a kernel with global atomics or volatile/acquire loads that
   runs past the budget with more than one cluster may be waiting for another block: Unsupported.
12. Anything else the model does not know (im2col TMA, wgmma with other types, the SIMD video
   instructions other than vabsdiff4, calls other than __assertfail, textures, ...) raises Unsupported
   naming the PTX instruction: never a verdict. So does a special register the model does not keep
   (%envreg<32>, which grid.sync() reads, %pm0, ...; PTX ISA 10): it is never read as zero. So does a form whose type or modifier a family's tables
   lack (scheduler.handler_for), rather than ending the run as an internal error. bar.red (what
   __syncthreads_count / _and / _or compile to) gives every waiter the reduction once the last thread
   the barrier counts has arrived.
13. A machine no kernel can tell from an H200: %nsmid reads `sms` (132), %smid the SM the block
   would get in the launch's first wave, %nctaid / %nclusterid / %clusterid / %cluster_* those of
   the real grid. `max_blocks` runs a random sample of whole clusters of a larger grid
   (report.ctaids, report.blocks_total say which ran).
14. setmaxnreg (ops/setmaxnreg.py): warpgroup-aligned, every warp of the warpgroup executes it
   (else Hang, as on an H200); .inc draws on the CTA's pool of entry registers x threads.
15. A failed device-side assert (call __assertfail) and trap: Violation "trap" (CRASH in the
   grading flow), quoting the condition. printf (call vprintf) formats each calling thread's line as C
   does and keeps it in report.printed. cvt to tf32 (.rna/.rn/.rz) rounds exactly on the bits.
16. Float arithmetic as the H200 does it, bit for bit (judge/model/rounding.py; checked against the H200 on
   random kernels by tests/model/test_model_random_kernels.py): add/sub/mul/div/fma/sqrt/rcp and cvt to a
   float round exactly in their mode (.rn, .rz, .rm, .rp; fma never rounds twice), every f32 NaN result is
   0x7fffffff (and an f16/bf16 one from cvt 0x7fff), min/max order -0 below +0, .sat makes NaN and -0 +0,
   cvt.f32.bf16 keeps a NaN's payload. Approximate instructions (.approx: __expf, __fdividef, rsqrtf, ...)
   are computed exactly, not as the MUFU unit approximates them.

Scheduling: the runnable threads at the lowest PC go first (schedule="lockstep"). That exposes most
orderings a race needs, but not all of them: the rules above are checked against the happens-before
order (vector clocks), not against the schedule, so a missing barrier or a missing wait is reported
whichever thread happens to run first. What depends on the order itself (which phase an arrival
counts for, whether a wait passes before a copy is issued) needs other schedules: schedule="ahead"
(scheduler.Ahead) lets warps run ahead of each other, in turns drawn from the seed, each alone until
it blocks or its quantum ends; report.schedule names the schedule and its seed, and the same seed
replays it. An mbarrier initialized for fewer arrivals than its producers make, or a consumer that
passes its first wait before the copy is issued, shows only there.

Not modelled (no verdict either way): races between ordinary st.shared/ld.shared of different
threads, global-memory races between blocks, atomics' memory orders (atomics run lane by lane),
a block of a cluster exiting while a peer still reads its shared memory (the schedule rarely lets
it exit first), the warp-level lockstep of shfl/vote (lanes are assumed converged).

Report: .counts (dynamic, per thread: "instructions", "cp.async", "smem_fill.cp.async.bytes",
"smem_fill.st.shared.bytes", "smem_fill.tma.bytes", "tma.load", "tma.store", "ld.shared",
"st.global", "bar.sync", "mbarrier.*", "wgmma", "wgmma.flops", ...), .timeline (events: cp.async,
commit, wait, land, barrier, mbarrier.init, tma.load, phase, tma.store, bulk.read, wgmma, exit,
violation; each with its step t), .steps, .seconds.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from judge.model import ops  # noqa: F401 - registers every instruction family with judge.model.registry
from judge.model import ptx as _ptx
from judge.model import replay  # noqa: F401 - model.replay.draw(report): the run as a pipeline timeline
from judge.model import scheduler
from judge.model.errors import Hang, Unsupported, Violation
from judge.model.state import Machine
from judge.model.tensormaps import HostMaps

__all__ = ["run", "Report", "Violation", "Hang", "Unsupported", "parse", "available", "HostMaps"]

_PARSED: dict = {}


def available() -> bool:
    """Can this installation's CPU model grade a kernel? Its entry point and its three outcomes are all
    here (a fork that ships judge/model reduced to a stub answers False). The CUDA grading flow
    (judge.grading.cuda_flow) and the tests that expect its verdicts ask this one question."""
    g = globals()
    return callable(g.get("run")) and all(isinstance(g.get(n), type) and issubclass(g[n], Exception)
                                          for n in ("Violation", "Hang", "Unsupported"))


def parse(build_or_ptx):
    """The parsed PTX module of a Build (cached by the build's key)."""
    text = build_or_ptx if isinstance(build_or_ptx, str) else build_or_ptx.ptx
    key = hash(text)
    mod = _PARSED.get(key)
    if mod is None:
        mod = _PARSED[key] = _ptx.parse(text)
    return mod


@dataclass
class Report:
    """What a run did: counts of instructions and bytes, the timeline of events, violations found."""
    kernel: str
    counts: Counter = field(default_factory=Counter)
    timeline: list = field(default_factory=list)
    violations: list = field(default_factory=list)
    steps: int = 0
    seconds: float = 0.0
    ctaids: list = field(default_factory=list)   # (x, y, z) of every block that ran
    blocks_total: int = 0                        # blocks in the launch's grid (more than ran: a sample)
    cancelled: list = field(default_factory=list)  # first ctaid of each cluster a try_cancel cancelled
    printed: list = field(default_factory=list)    # what the kernel's printf calls printed, a line per call
    schedule: str = "lockstep"                     # the schedule that ran (run(schedule=...), with its seed)

    def __str__(self):
        top = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        return f"{self.kernel}: {self.steps} instruction groups in {self.seconds:.2f} s; {top}"


def _dim3(v):
    v = tuple(int(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    return (v + (1, 1, 1))[:3]


def run(build, kernel: str, *, grid=(1, 1, 1), block=(1, 1, 1), args=(), shared_bytes: int = 0,
        cluster=(1, 1, 1), budget: int = 100_000, strict: bool = True, seed: int | None = None,
        sms: int = 132, max_blocks: int | None = None, memory=(), schedule: str = "lockstep") -> Report:
    """Run `kernel` of `build` (a judge.gpu.build.Build, or PTX text) on the CPU model.

    budget: instruction groups per cluster before the run counts as a hang. strict: raise the
    first Violation (False: record them all in report.violations and let poisoned bytes flow).
    seed: the scramble order of TMA landings and of a sampled grid (random when None).
    sms: what %nsmid reads and %smid is taken modulo (132: an H200). max_blocks: run at most this
    many blocks, a random sample of whole clusters, when the grid is larger (report.ctaids says
    which ran; the others write nothing). The grid, %nctaid, %nclusterid and every block's %ctaid
    are the real launch's either way. memory: more NumPy arrays that are global memory the kernel reaches
    through addresses it reads from memory, not from its arguments (a table of tensor base addresses).
    schedule: "lockstep" (the runnable threads at the lowest PC go together) or "ahead" (warps take turns
    in an order drawn from the seed, each running alone until it blocks or its quantum ends:
    scheduler.Ahead); report.schedule, and a Violation's or Hang's .schedule, say which ran.
    """
    if schedule not in ("lockstep", "ahead"):
        raise ValueError(f"schedule {schedule!r}: 'lockstep' or 'ahead'")
    t0 = time.perf_counter()
    mod = parse(build)
    if kernel not in mod.kernels:
        raise KeyError(f"no kernel {kernel!r} in the PTX (kernels: {', '.join(mod.kernels)}); "
                       f"declare it extern \"C\" __global__")
    k = mod.kernels[kernel]
    grid, block, cluster = _dim3(grid), _dim3(block), _dim3(cluster or (1, 1, 1))
    if k.cluster_dims:                       # __cluster_dims__ in the source decides
        if cluster not in ((1, 1, 1), k.cluster_dims):
            raise ValueError(f"{kernel} is compiled with __cluster_dims__{k.cluster_dims}; launched with "
                             f"cluster {cluster}")
        cluster = k.cluster_dims
    for g, c in zip(grid, cluster):
        if g % c:
            raise ValueError(f"grid {grid} is not a multiple of the cluster {cluster}")
    if np.prod(block) > 1024:
        raise ValueError(f"block {block} has more than 1024 threads")
    name = Path(getattr(build, "name", "kernel.cu")).name
    rep = Report(kernel)
    seed = seed if seed is not None else int.from_bytes(np.random.bytes(4), "little")
    origins = [(ox, oy, oz) for oz in range(0, grid[2], cluster[2]) for oy in range(0, grid[1], cluster[1])
               for ox in range(0, grid[0], cluster[0])]
    per = int(np.prod(cluster))
    rep.blocks_total = len(origins) * per
    if max_blocks is not None and rep.blocks_total > max_blocks:
        pick = np.random.default_rng(seed).choice(len(origins), max(1, int(max_blocks) // per), replace=False)
        origins = [origins[i] for i in sorted(pick)]
    regs = 0 if isinstance(build, str) else getattr(build, "resources", {}).get(kernel, {}).get("registers", 0)
    with np.errstate(all="ignore"):
        m = Machine(mod, k, grid=grid, block=block, cluster=cluster, args=tuple(args),
                    shared_bytes=int(shared_bytes), budget=budget, strict=strict, seed=seed,
                    source_name=name, sms=sms, entry_registers=regs, memory=tuple(memory))
        if isinstance(getattr(build, "source", None), str):
            m.source_lines = _ptx.source_lines(build.source, name)
        m.launch_pending = list(origins)     # a try_cancel (ops.clc) may take clusters out before they start
        if schedule == "ahead":
            m.ahead = scheduler.Ahead(m, seed)
        try:
            while m.launch_pending:
                o = m.launch_pending.pop(0)
                scheduler.run_cluster(m, o)
                rep.steps += m.steps
                rep.ctaids += [(o[0] + x, o[1] + y, o[2] + z) for z in range(cluster[2])
                               for y in range(cluster[1]) for x in range(cluster[0])]
        except (Violation, Hang) as e:
            e.schedule = m.schedule_note
            raise
        finally:
            rep.schedule = m.schedule_note
            rep.cancelled = list(m.launch_cancelled)
            rep.counts = m.counts
            rep.timeline = m.timeline
            rep.violations = m.violations
            rep.printed = list(getattr(m, "printed", ()))
            rep.seconds = time.perf_counter() - t0
    return rep
