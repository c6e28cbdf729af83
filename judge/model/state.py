"""judge.model.state - what the CPU model's machine holds: memory regions, registers, clocks, and addresses.

    m = Machine(module, kernel, grid=..., block=..., cluster=..., args=..., shared_bytes=..., budget=...,
                strict=True, seed=0, source_name="solution.cu")
    m.begin_cluster((0, 0, 0))       # the per-cluster arrays: registers, shared memory, vector clocks
    m.rd(operand, "u32", ins)        # an operand's value per thread (NumPy array or scalar)
    m.wr(operand, value, mask, full) # write a register for the threads in mask
    m.addr(operand, ins)             # per-thread address of an [addr] operand

Used by judge.model.scheduler (which runs the instructions) and the instruction families under
judge/model/ops/. Every thread of a cluster's blocks is a lane of NumPy arrays: registers are
arrays of n lanes, shared memory is (blocks, bytes). The shared-memory word states that the race
checks read live here too (w_state, w_thread, w_time, ...), with their meaning in judge.model.checks.
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np

from judge.model import checks
from judge.model import ptx as _ptx
from judge.model import tensor_memory, tensormaps
from judge.model.errors import Unsupported

SHARED_BASE = 0x9000_0000_0000_0000     # generic address of shared offset 0 (cvta.shared)
PARAM_BASE = 0xB000_0000_0000_0000      # generic address of the kernel parameter buffer
LOCAL_BASE = 0xA000_0000_0000_0000
CLUSTER_SHIFT = 24                       # mapa: shared::cluster address = ((rank + 1) << 24) | offset
POISON32 = checks.POISON32               # a quiet NaN: what a read of unlanded bytes returns
N_MBAR_COLS = 64                         # vector-clock columns for mbarriers (their TMA bytes)

DT = {"b8": np.uint8, "u8": np.uint8, "s8": np.int8, "b16": np.uint16, "u16": np.uint16,
      "s16": np.int16, "f16": np.float16, "bf16": np.uint16, "b32": np.uint32, "u32": np.uint32,
      "s32": np.int32, "f32": np.float32, "b64": np.uint64, "u64": np.uint64, "s64": np.int64,
      "f64": np.float64, "pred": np.bool_, "f16x2": np.uint32, "bf16x2": np.uint32}
STORE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
TYPES = set(DT)


def types(parts):
    """The PTX type modifiers of an instruction's parts, in order (e.g. ['f32', 'f16'] for cvt.f32.f16)."""
    return [p for p in parts if p in TYPES]


class _Waits(dict):
    """thread -> (kind, key) it is blocked on, as the instruction families record it; `at` keeps the
    instruction (PC) each thread blocked at, so a Hang names the line where the threads wait."""

    def __init__(self, m):
        super().__init__()
        self.m, self.at = m, {}

    def __setitem__(self, t, why):
        super().__setitem__(t, why)
        self.at[t] = self.m.cur_pc


def source_symbol(name: str) -> str:
    """A PTX symbol as the learner's source names it: `_ZZ7ws_gemmE5empty` (a static __shared__ variable
    of the function ws_gemm, Itanium-mangled) -> `empty`; any other name as it is."""
    if not name.startswith("_ZZ"):
        return name
    best = None
    for hit in re.finditer(r"E(\d+)", name):
        n, j = int(hit.group(1)), hit.end()
        rest = name[j + n:]
        if len(name) >= j + n and re.fullmatch(r"(_\d*_?)?", rest):
            best = name[j:j + n]
    return best or name


class Machine:
    """One launch's machine: the module's memory and parameters, and one cluster's threads at a time."""

    def __init__(self, module, kernel, *, grid, block, cluster, args, shared_bytes, budget,
                 strict, seed, source_name, sms=132, entry_registers=0, memory=()):
        self.mod, self.k = module, kernel
        self.sms = int(sms)                              # %nsmid: the target GPU's SMs (132: an H200)
        self.entry_registers = int(entry_registers or 0)  # ptxas's count at entry (setmaxnreg's pool)
        self.wait_descriptions = {}  # block_why kind -> fn(m, key, who) -> the line a Hang says for it
        self.grid, self.block, self.cluster = grid, block, cluster
        self.strict, self.budget = strict, budget
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.ahead = None                    # judge.model.scheduler.Ahead under schedule="ahead"
        self.schedule_note = "lockstep"
        self.gridid = int(self.rng.integers(1, 1 << 20))
        self.counts = Counter()
        self.timeline = []
        self.violations = []
        self.source_name = source_name             # the learner's file as messages name it
        self.source_lines = {}                     # the learner's line number -> its text (judge.model.run)
        self.cluster_explicit = tuple(cluster) != (1, 1, 1)   # %is_explicit_cluster
        self.tma_loads = []          # TMA/bulk loads waiting for their mbarrier phase (judge.model.completion)
        # cluster launch control (ops.clc): the clusters of the launch not started yet (judge.model.run
        # takes the next from the front; a successful try_cancel removes one), those cancelled
        self.launch_pending, self.launch_cancelled = [], []
        # tensor maps as objects (judge.model.tensormaps): id -> spec; the tensormap proxy's writes, releases
        # and (per cluster) acquires, keyed by the map's location
        self.tensormap_objs = []
        self.tensormap_writes, self.tensormap_released, self.tensormap_acquired = {}, {}, {}
        self.cluster_serial = 0
        self._setup_globals(args, memory)
        self._setup_shared(shared_bytes)

    # ------------------------------------------------------------------ memory setup
    def _setup_globals(self, args, memory=()):
        from judge.hw import tma as _tma
        self.regions = []            # (base, size, uint8 view)
        self.sym = {}                # symbol -> address (global) or shared offset
        self.sym_space = {}
        self.keep = []
        # module variables (__device__, __constant__) live as long as the module: they keep their
        # values from one launch to the next, as on the GPU
        store = self.mod.__dict__.setdefault("_memory", {})
        for v in self.mod.vars:
            if v.space in ("global", "const"):
                arr = store.get(v.name)
                if arr is None:
                    arr = store[v.name] = np.zeros(max(v.size, 1), np.uint8)
                    if v.init:
                        arr[:len(v.init)] = np.frombuffer(v.init, np.uint8)
                self.keep.append(arr)
                self._add_region(arr)
                self.sym[v.name] = arr.ctypes.data
                self.sym_space[v.name] = "global"
        if len(args) != len(self.k.params):
            raise TypeError(f"{self.k.name} takes {len(self.k.params)} arguments, {len(args)} given")
        off = 0
        buf = bytearray()
        self.tmaps = {}
        host_specs = []
        for (pname, size, align), a in zip(self.k.params, args):
            off = -(-off // align) * align
            buf.extend(b"\0" * (off - len(buf)))
            if isinstance(a, np.ndarray) and a.ndim > 0:
                if not a.flags.c_contiguous:
                    raise TypeError(f"argument {pname}: pass C-contiguous arrays")
                self._add_region(a.reshape(-1).view(np.uint8))
                raw = int(a.ctypes.data).to_bytes(8, "little")
            elif isinstance(a, (_tma.TensorMap, _tma.TensorMapSpec)):
                spec = a.spec if isinstance(a, _tma.TensorMap) else a
                self.tmaps[PARAM_BASE + off] = spec
                raw = tensormaps.encode(self, spec).tobytes() if size == tensormaps.SIZE else b"\0" * size
            elif isinstance(a, tensormaps.HostMaps):        # a pointer to maps the host wrote in global memory
                raw = a.place(self).to_bytes(8, "little")
                self._add_region(a.buf)
                self.keep.append(a.buf)
                host_specs += a.specs
            elif isinstance(a, (np.generic, int, float)):
                raw = np.asarray(a).tobytes() if isinstance(a, np.generic) else None
                if raw is None:
                    raise TypeError(f"argument {pname}: pass NumPy scalars (np.int32(n)), not {type(a).__name__}")
            else:
                raise TypeError(f"argument {pname}: NumPy arrays, NumPy scalars, judge.hw.tma maps or "
                                f"judge.model.tensormaps.HostMaps, "
                                f"not {type(a).__name__}")
            if len(raw) != size:
                raise TypeError(f"argument {pname} is {size} bytes in the kernel, {len(raw)} given")
            self.sym[pname] = PARAM_BASE + off
            self.sym_space[pname] = "param"
            buf.extend(raw)
            off += size
        self.param = np.frombuffer(bytes(buf) + b"\0" * 8, np.uint8).copy()
        for a in memory:             # global memory the kernel reaches through pointers held in memory
            if not (isinstance(a, np.ndarray) and a.flags.c_contiguous):
                raise TypeError("memory=: pass C-contiguous NumPy arrays")
            self._add_region(a.reshape(-1).view(np.uint8))
        # a tensor map's tensor is global memory too (the caller keeps the array alive)
        import ctypes
        for spec in [*self.tmaps.values(), *host_specs]:
            if any(b <= spec.address < b + n for b, n, _ in self.regions):
                continue
            eb = spec.elem_bytes
            span = eb * spec.dims[0] + sum((d - 1) * st for d, st in zip(spec.dims[1:], spec.strides))
            if spec.extent_limit:
                span = max(span, spec.extent_limit)
            u8 = np.ctypeslib.as_array((ctypes.c_uint8 * span).from_address(spec.address))
            self.keep.append(u8)
            self.regions.append((spec.address, span, u8))
        self.regions.sort(key=lambda r: r[0])
        self.rbase = np.array([r[0] for r in self.regions], np.uint64)

    def _add_region(self, u8):
        self.regions.append((int(u8.ctypes.data), u8.size, u8))

    def _setup_shared(self, dyn):
        off = 0
        ext = []
        self.shared_vars = []        # (offset, size, the name in the learner's source) of static shared variables
        for v in list(self.mod.vars) + list(self.k.shared):
            if v.space != "shared":
                continue
            if v.extern:
                ext.append(v)
                continue
            off = -(-off // max(v.align, 1)) * max(v.align, 1)
            self.sym[v.name] = off
            self.sym_space[v.name] = "shared"
            self.shared_vars.append((off, v.size, source_symbol(v.name)))
            off += v.size
        off = -(-off // 1024) * 1024 if ext else off
        for v in ext:
            self.sym[v.name] = off
            self.sym_space[v.name] = "shared"
        self.static_smem = off
        self.smem_size = -(-(off + dyn) // 16) * 16 + 16
        loff = 0
        for v in self.k.local:
            loff = -(-loff // max(v.align, 1)) * max(v.align, 1)
            self.sym[v.name] = LOCAL_BASE + loff
            self.sym_space[v.name] = "local"
            loff += v.size
        self.local_size = loff

    # ------------------------------------------------------------------ where, and the report
    def where(self, ins) -> str:
        """Where an instruction came from: its source line (judge.model.ptx.place: the learner's file and
        line, or a header's line and the learner's line that called it) and its PTX line."""
        src = _ptx.place(self.mod, ins, self.source_name)
        return f"{src} [PTX line {ins.line}: {ins.text}]" if src else f"PTX line {ins.line}: {ins.text}"

    def mbar_name(self, off, mb=None) -> str:
        """An mbarrier in words, by the name the learner's source gives it: "`empty[0]` (shared 0x20)".

        A static __shared__ variable is named by its symbol and, for an array of mbarriers (8 bytes
        each), the index (offset - start) / 8. One carved out of dynamic shared memory has no symbol:
        its name comes from the learner's line that initialized it (`mbar_init(&full[s], 1)` -> `full`),
        its index from its place among the mbarriers that line initialized, in address order. Without
        either, "the mbarrier at shared 0x20"."""
        name = None
        for start, size, sym in self.shared_vars:
            if start <= off < start + size:
                name = sym if size <= 8 else f"{sym}[{(off - start) // 8}]"
                break
        if name is None and mb is not None and getattr(mb, "init_ins", None) is not None:
            name = self._name_from_init(mb)
        return f"`{name}` (shared 0x{off:x})" if name else f"the mbarrier at shared 0x{off:x}"

    def _name_from_init(self, mb):
        # the innermost of the learner's lines that calls an init function with the barrier's address
        # (a helper of the learner's own file is passed by, to the line that calls it)
        hit = None
        for line in _ptx.learner_lines(self.mod, mb.init_ins, self.source_name):
            hit = re.search(r"init\w*\s*\(\s*&?\s*\(?\s*([A-Za-z_]\w*)\s*([\[+,)])", self.source_lines.get(line, ""))
            if hit:
                break
        if not hit:
            return None
        same = sorted(o.off for o in self.mbars.values()
                      if o.cta == mb.cta and getattr(o, "init_ins", None) is mb.init_ins)
        if hit.group(2) in "[+" or len(same) > 1:
            return f"{hit.group(1)}[{same.index(mb.off)}]" if mb.off in same else None
        return hit.group(1)

    def learner_at(self, ins) -> str:
        """'k.cu:82': the learner's line an instruction came from, or "" when the PTX names none."""
        line = _ptx.learner_line(self.mod, ins, self.source_name)
        return f"{self.source_name}:{line}" if line else ""

    def place_of(self, threads) -> str:
        """Where these blocked threads wait, the learner's line first (a Hang's lines open with it)."""
        pcs = Counter(self.block_why.at[int(t)] for t in threads if int(t) in self.block_why.at)
        return "; ".join(self.where(self.k.code[p]) for p, _ in pcs.most_common(2))

    def fail(self, rule, ins, message):
        """Record (strict: raise) a Violation of a rule of judge.model.checks.RULES."""
        checks.fail(self, rule, ins, message)

    def event(self, kind, **kw):
        """Append an event to the timeline (at most 20000), stamped with the current step."""
        if len(self.timeline) < 20000:
            kw["t"] = self.gtime
            kw["kind"] = kind
            self.timeline.append(kw)

    def tdesc(self, t):
        """Thread t in words: its thread index, warp and (in a cluster) block rank."""
        t = int(t)
        c, lt = divmod(t, self.nthr_cta)
        s = f"thread {lt} (warp {lt // 32})"
        return s + (f" of block rank {c}" if self.ncta > 1 else "")


    def begin_cluster(self, cluster_origin):
        """Fresh per-cluster state for the blocks of the cluster at cluster_origin (block coordinates)."""
        bx, by, bz = self.block
        cx, cy, cz = self.cluster
        self.nthr_cta = bx * by * bz
        self.ncta = cx * cy * cz
        n = self.nthr_cta * self.ncta
        self.n = n
        self.cluster_serial += 1
        self.tensormap_acquired = {}          # (thread, location) -> (map id, why not) of this cluster's acquires
        self.clc_pending = []                 # mbarriers owed a try_cancel response's complete-tx (completion)
        self.clc_failed_seen = np.zeros(self.ncta, bool)   # a block saw a try_cancel fail (ops.clc)
        self.regs128 = {}                     # .b128 registers: name -> (threads, 2) uint64 (ops.clc)
        lt = np.arange(n) % self.nthr_cta
        self.cta = np.arange(n) // self.nthr_cta
        cr = self.cta
        crx, cry, crz = cr % cx, (cr // cx) % cy, cr // (cx * cy)
        ox, oy, oz = cluster_origin
        u32 = np.uint32
        self.sreg = {
            "%tid.x": (lt % bx).astype(u32), "%tid.y": ((lt // bx) % by).astype(u32),
            "%tid.z": (lt // (bx * by)).astype(u32),
            "%ntid.x": np.full(n, bx, u32), "%ntid.y": np.full(n, by, u32), "%ntid.z": np.full(n, bz, u32),
            "%ctaid.x": (ox + crx).astype(u32), "%ctaid.y": (oy + cry).astype(u32),
            "%ctaid.z": (oz + crz).astype(u32),
            "%nctaid.x": np.full(n, self.grid[0], u32), "%nctaid.y": np.full(n, self.grid[1], u32),
            "%nctaid.z": np.full(n, self.grid[2], u32),
            "%laneid": (lt % 32).astype(u32), "%warpid": (lt // 32).astype(u32),
            "%nwarpid": np.full(n, 64, u32),
            "%cluster_ctaid.x": crx.astype(u32), "%cluster_ctaid.y": cry.astype(u32),
            "%cluster_ctaid.z": crz.astype(u32),
            "%cluster_nctaid.x": np.full(n, cx, u32), "%cluster_nctaid.y": np.full(n, cy, u32),
            "%cluster_nctaid.z": np.full(n, cz, u32),
            "%cluster_ctarank": cr.astype(u32), "%cluster_nctarank": np.full(n, self.ncta, u32),
            "%clusterid.x": np.full(n, ox // cx, u32), "%clusterid.y": np.full(n, oy // cy, u32),
            "%clusterid.z": np.full(n, oz // cz, u32),
            "%nclusterid.x": np.full(n, self.grid[0] // cx, u32),
            "%nclusterid.y": np.full(n, self.grid[1] // cy, u32),
            "%nclusterid.z": np.full(n, self.grid[2] // cz, u32),
            "%is_explicit_cluster": np.full(n, self.ncta > 1 or self.cluster_explicit, np.bool_),
            "%lanemask_lt": ((np.uint64(1) << (lt % 32).astype(np.uint64)) - np.uint64(1)).astype(u32),
            "%lanemask_le": ((np.uint64(2) << (lt % 32).astype(np.uint64)) - np.uint64(1)).astype(u32),
            "%lanemask_eq": (np.uint64(1) << (lt % 32).astype(np.uint64)).astype(u32),
            # the target GPU's own values (an H200 has 132 SMs), so that no kernel can tell the model by
            # them; %smid: the SM the block would get in the launch's first wave, handed out in order of
            # the blocks' linear index (a cluster's blocks on neighbouring SMs)
            "%nsmid": np.full(n, self.sms, u32),
            "%smid": ((((oz + crz) * self.grid[1] + (oy + cry)) * self.grid[0] + (ox + crx)) % self.sms).astype(u32),
            "%gridid": np.full(n, self.gridid, np.uint64),
            "%dynamic_smem_size": np.full(n, self.smem_size - self.static_smem - 16, u32),
            "%total_smem_size": np.full(n, self.smem_size, u32),
        }
        self.sreg["%lanemask_gt"] = (~self.sreg["%lanemask_le"]).astype(u32)
        self.sreg["%lanemask_ge"] = (~self.sreg["%lanemask_lt"]).astype(u32)
        self.sreg["%tid"] = self.sreg["%tid.x"]
        self.lt = lt
        # -- registers and the scheduler's view of each thread (judge.model.scheduler)
        self.regs = {}                        # register name -> array of n lanes
        self.pc = np.zeros(n, np.int64)
        self.alive = np.ones(n, bool)
        self.blocked = np.zeros(n, bool)
        self.block_why = _Waits(self)         # thread -> (kind, key): what it waits on, for the Hang
        self.cur_mask = np.ones(n, bool)      # the threads executing the current instruction
        self.steps = 0
        self.cur_pc = 0
        self.local = np.zeros((n, max(self.local_size, 8)), np.uint8)
        # -- shared memory, and what the checks know of each 4-byte word (judge.model.checks)
        W = self.smem_size // 4
        self.sm = np.zeros((self.ncta, self.smem_size), np.uint8)
        self.sm[:] = np.frombuffer(np.uint32(POISON32).tobytes() * (self.smem_size // 4), np.uint8)
        self.smw = self.sm.view(np.uint32)
        self.w_state = np.zeros((self.ncta, W), np.int8)     # checks.PLAIN, CPA_PENDING, ...
        self.w_thread = np.full((self.ncta, W), -1, np.int32)  # its last writer (or an mbarrier's column)
        self.w_time = np.zeros((self.ncta, W), np.int64)
        self.w_group = np.zeros((self.ncta, W), np.int32)
        self.w_pc = np.zeros((self.ncta, W), np.int32)
        self.w_atomic = np.zeros((self.ncta, W), bool)      # last write was an atomic (atomics do not race)
        self.nwarps = -(-n // 32)             # the last time each warp of the cluster read each word, and where
        self.r_wt = np.zeros((self.ncta, W, self.nwarps), np.int64)
        self.r_pc = np.zeros((self.ncta, W), np.int32)
        self.r_solo = np.full((self.ncta, W, self.nwarps), -1, np.int32)   # the one lane that read it (checks.note_read)
        self.bulk_reading = np.zeros((self.ncta, W), np.int16)   # asynchronous reads still running
        # a bulk store's read ends at its own thread's covering wait: (that thread, when) per word, until a barrier
        # of the whole block makes it known to all (judge.model.checks.check_bulk_waited)
        self.bulk_waited_t = np.full((self.ncta, W), -1, np.int32)
        self.bulk_waited_time = np.zeros((self.ncta, W), np.int64)
        self.bulk_waited_any = False
        self.remote_t = np.zeros((self.ncta, n), np.int64)  # DSMEM: last access of each thread into block c
        self.cta_done = np.zeros(self.ncta, bool)
        # -- clocks: happens-before as vector clocks, one column per thread and per mbarrier
        self.VC = np.zeros((n, n + N_MBAR_COLS), np.int64)
        self.gtime = 1
        # -- block barriers and the cluster barrier (ops.barriers, scheduler.release_*)
        self.bars = {}                        # (cta, id) or ("warp", cta, warp) -> dict(mask, waiters, expected)
        self.cl_count = np.zeros(n, np.int64)  # cluster-barrier arrivals per thread
        self.cl_acc = {}                      # cluster phase -> the clocks its arrivals released
        # -- cp.async (ops.cp_async, completion.land_cp_async)
        self.ncommit = np.zeros(n, np.int64)
        self.cover = np.full(n, -1, np.int64)
        self.last_wait_n = np.full(n, -1, np.int64)
        self.cpa = []                         # pending copies: dict(lanes, words, data, group, seq, cta)
        self.cpa_seq = np.zeros(n, np.int64)
        self.cpa_arrivals = []                # cp.async.mbarrier.arrive still waiting on copies
        # -- mbarriers (ops.mbarrier, completion.ModelMbarrier) and TMA / bulk copies (ops.bulk)
        self.mbars = {}                       # (cta, offset) -> completion.ModelMbarrier
        self.last_mbar_wait = {}              # thread -> (mbarrier, (ins, thread) whose arrival completed the
                                              # phase, the wait's ins) of its last successful wait
        self.mbar_by_col = {}                 # vector-clock column -> its mbarrier
        self.next_col = n
        self.nbulk = np.zeros(n, np.int64)    # bulk async-groups committed per thread
        self.bulk = []                        # pending bulk / TMA stores
        # -- wgmma (ops.wgmma)
        self.wg_fence = np.full(n, -1, np.int64)     # last wgmma.fence per thread
        self.wg_ncommit = np.zeros(n, np.int64)
        self.wg_ops = []
        self.acc_pending = {}                        # register -> lanes whose wgmma has not completed
        self.acc_names = set()
        self.wg_written = {}
        # -- tensor memory and tcgen05 (ops.tcgen05)
        self.tc = None                        # tensor memory and tcgen05 (judge.model.tensor_memory), at first use
        self.taint = {}                       # register -> lanes whose value came from a tcgen05.ld (or wgmma)
        self.cur_taint = None                 # lanes of the current instruction that read such a value
        self.mem_taint = {}                   # "shared" (blocks, bytes) / "local" (threads, bytes): marked bytes
        self.taint_source = "tcgen05.ld"      # what the mark means: the instruction whose results it follows

    def taint_store(self, space, rows, off, w, lanes):
        """A store of w bytes per lane at (rows, off) of shared or local memory: the bytes carry the mark
        of the stored value (a tcgen05.ld result), or lose it."""
        t = self.mem_taint.get(space)
        if t is None:
            if self.cur_taint is None or not self.cur_taint[lanes].any():
                return
            t = self.mem_taint[space] = np.zeros((self.sm if space == "shared" else self.local).shape, bool)
        mark = self.cur_taint[lanes] if self.cur_taint is not None else np.zeros(len(lanes), bool)
        t[rows[:, None], off[:, None] + np.arange(w)] = mark[:, None]

    def taint_load(self, space, rows, off, w, lanes):
        """A load from marked bytes marks the loaded value (it goes on to the destination register)."""
        t = self.mem_taint.get(space)
        if t is None:
            return
        hit = t[rows[:, None], off[:, None] + np.arange(w)].any(axis=1)
        if hit.any():
            cur = np.zeros(self.n, bool) if self.cur_taint is None else self.cur_taint.copy()
            cur[lanes] |= hit
            self.cur_taint = cur

    # ------------------------------------------------------------------ registers
    def _store_dtype(self, name, fallback):
        ty = self.k.regs.get(name)
        if ty is None:
            base = name.rstrip("0123456789")
            ty = self.k.regs.get(base, fallback)
        return np.bool_ if ty == "pred" else STORE[_ptx.TYPE_BYTES.get(ty, 4)]

    def rd(self, op, ty, ins=None):
        """Operand value as an array (or scalar) of PTX type ty."""
        dt = DT[ty]
        if op.kind == "reg":
            name = op.name
            if self.acc_pending and name in self.acc_pending and (self.acc_pending[name] & self.cur_mask).any():
                checks.early_accumulator_access(self, name, ins, "read")
            if self.tc is not None and name in self.tc.ld_pending and (self.tc.ld_pending[name] & self.cur_mask).any():
                tensor_memory.early_register(self, name, ins, "read")
            if self.taint and name in self.taint:         # the value came out of tensor memory: so does the result
                self.cur_taint = self.taint[name].copy() if self.cur_taint is None else self.cur_taint | self.taint[name]
            if name in self.regs:
                v = self.regs[name]
            elif name in self.sreg:
                v = self.sreg[name]
            elif name in ("%clock", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"):
                # time advances with the model's steps (32 "ns" or cycles a step): spin loops end
                v = np.full(self.n, 32 * self.gtime, np.uint64 if name in ("%clock64", "%globaltimer") else np.uint32)
            elif name.startswith("%") and (name in self.k.regs or name.rstrip("0123456789") in self.k.regs):
                v = self.regs.setdefault(name, np.zeros(self.n, self._store_dtype(name, ty)))
            elif name.startswith("%"):
                # a register no .reg declares is a special register (PTX ISA 10, "Special Registers"); one the
                # model does not keep (%envreg<32>, which cooperative groups' grid.sync() reads, %pm0, ...)
                # has a value the driver or the hardware sets: the model cannot know it, so no verdict
                raise Unsupported(ins.text if ins else name,
                                  f"special register {name} (PTX ISA 10): the model does not know its value")
            else:
                raise Unsupported(ins.text if ins else name, f"unknown register {name}")
            if dt == np.bool_:
                r = v.astype(bool) if v.dtype != np.bool_ else v
                return ~r if op.neg else r
            if v.dtype.itemsize == np.dtype(dt).itemsize and v.dtype != np.bool_:
                return v.view(dt)
            if v.dtype == np.bool_:
                return v.astype(dt)
            # narrower/wider register than the type: truncate or extend through the bits
            bits = v.view(STORE[v.dtype.itemsize]).astype(np.uint64)
            return bits.astype(STORE[np.dtype(dt).itemsize]).view(dt) if np.dtype(dt).itemsize <= 8 else bits
        if op.kind == "imm":
            if dt in (np.float32, np.float64, np.float16):
                return dt(op.value)
            if dt == np.bool_:
                return bool(op.value)
            return np.array(op.value & ((1 << (8 * np.dtype(dt).itemsize)) - 1)).astype(STORE[np.dtype(dt).itemsize]).view(dt)[()]
        if op.kind == "fimm":
            if op.width == 4:
                f = np.array(op.value, np.uint32).view(np.float32)[()]
            else:
                f = np.array(op.value, np.uint64).view(np.float64)[()]
            if dt in (np.float32, np.float64, np.float16):
                return dt(f)
            return np.array(op.value).astype(STORE[np.dtype(dt).itemsize]).view(dt)[()]
        if op.kind == "sym":
            if op.name not in self.sym:
                raise Unsupported(ins.text if ins else op.name, f"unknown symbol {op.name}")
            return np.array(self.sym[op.name]).astype(STORE[np.dtype(dt).itemsize]).view(dt)[()]
        raise Unsupported(ins.text if ins else str(op), f"operand kind {op.kind}")


    def wr(self, op, val, mask, full, internal=False):
        """Write val to register op for the threads in mask (full: all threads). internal: a wgmma completion."""
        if op.kind == "sink":
            return
        if op.kind != "reg":
            raise Unsupported(str(op), "destination is not a register")
        name = op.name
        if not internal and self.acc_names and name in self.acc_names:
            if name in self.acc_pending and (self.acc_pending[name] & mask).any():
                checks.early_accumulator_access(self, name, None, "write")
            w = self.wg_written.setdefault(name, np.full(self.n, -1, np.int64))
            w[mask] = self.gtime
        if not internal and self.tc is not None and name in self.tc.ld_pending and (self.tc.ld_pending[name] & mask).any():
            tensor_memory.early_register(self, name, None, "write")
        if not internal and (self.cur_taint is not None or name in self.taint):
            tt = self.taint.setdefault(name, np.zeros(self.n, bool))
            tt[mask] = self.cur_taint[mask] if self.cur_taint is not None else False
        val = np.asarray(val)
        reg = self.regs.get(name)
        if reg is None:
            reg = self.regs[name] = np.zeros(self.n, self._store_dtype(
                name, "pred" if val.dtype == np.bool_ else {1: "b8", 2: "b16", 4: "b32", 8: "b64"}[val.dtype.itemsize]))
        if reg.dtype == np.bool_:
            bits = val.astype(bool)
        elif val.dtype == np.bool_:
            bits = val.astype(reg.dtype)
        elif val.dtype.itemsize == reg.dtype.itemsize:
            bits = val.view(reg.dtype) if val.ndim else val.reshape(1).view(reg.dtype)[0]
        else:
            if val.dtype.kind == "f":
                val = val.view(STORE[val.dtype.itemsize])
            if val.dtype.kind == "i":
                bits = val.astype(np.int64).astype(reg.dtype)
            else:
                bits = val.astype(np.uint64).astype(reg.dtype)
        if full:
            reg[:] = bits
        elif np.ndim(bits):
            reg[mask] = bits[mask]
        else:
            reg[mask] = bits

    # ------------------------------------------------------------------ addresses
    def addr(self, op, ins):
        """Per-lane address of an [addr] operand (uint64 array)."""
        if op.kind != "addr":
            raise Unsupported(ins.text, "expected an address operand")
        wide = True
        if not op.name:
            base = np.uint64(0)
        elif op.name in self.sym:
            base = np.uint64(self.sym[op.name])
            wide = self.sym_space.get(op.name) != "shared"
        else:
            wide = self._is64(op.name)
            base = self.rd(_ptx.Operand("reg", name=op.name), "u64" if wide else "u32", ins).astype(np.uint64)
        a = np.broadcast_to(np.asarray(base, np.uint64), (self.n,))
        a = a + np.uint64(op.value & 0xFFFFFFFFFFFFFFFF)         # wraps modulo 2^64, as the hardware's adds
        # a 32-bit address register plus an offset wraps at 32 bits ([%r95+16384] with %r95 = x - 16384)
        return a if wide else a & np.uint64(0xFFFFFFFF)

    def _is64(self, name):
        v = self.regs.get(name)
        if v is not None:
            return v.dtype.itemsize == 8
        ty = self.k.regs.get(name) or self.k.regs.get(name.rstrip("0123456789"), "b32")
        return _ptx.TYPE_BYTES.get(ty, 4) == 8

    def space_of(self, ins):
        """The state space an instruction names (generic when none)."""
        for s in ("shared::cta", "shared::cluster", "shared", "global", "local", "param", "const"):
            if s in ins.parts:
                return s.split("::")[0] if s != "shared::cluster" else "shared::cluster"
        return "generic"

    def resolve_generic(self, a, lanes, ins):
        """Generic addresses -> (space, addresses) for the given lanes (one space per instruction)."""
        top = (a[lanes] >> np.uint64(60)).astype(np.int64)
        kinds = set(top.tolist())
        if len(kinds) > 1:
            raise Unsupported(ins.text, "one generic access touching several state spaces")
        k = kinds.pop() if kinds else 0
        if k == (SHARED_BASE >> 60):
            return "shared", a - np.uint64(SHARED_BASE)
        if k == (PARAM_BASE >> 60):
            return "param", a - np.uint64(PARAM_BASE)
        if k == (LOCAL_BASE >> 60):
            return "local", a - np.uint64(LOCAL_BASE)
        return "global", a

    # global memory
    def _regions_of(self, a, w, lanes, ins, write=False):
        idx = np.searchsorted(self.rbase, a[lanes], side="right") - 1
        out = []
        for r in np.unique(idx):
            sel = lanes[idx == r]
            ok = r >= 0
            if ok:
                base, size, u8 = self.regions[r]
                off = (a[sel] - np.uint64(base)).astype(np.int64)
                ok = bool(np.all(off + w <= size))
            if not ok:
                bad = sel[0]
                self.fail("global-bounds", ins, f"{self.tdesc(bad)} {'wrote' if write else 'read'} "
                          f"{w} bytes at global address 0x{int(a[bad]):x}, outside every array passed "
                          f"to the kernel")
                raise checks.abort(self, "global-bounds", ins, "out-of-bounds global access")
            out.append((sel, u8, off))
        return out

    def gload(self, a, w, lanes, ins):
        """Read w bytes of global memory at a[lane] for each lane: (lanes, w) uint8."""
        data = np.zeros((len(lanes), w), np.uint8)
        pos = {int(t): i for i, t in enumerate(lanes)} if len(lanes) < 0 else None
        order = np.empty(self.n, np.int64)
        order[lanes] = np.arange(len(lanes))
        for sel, u8, off in self._regions_of(a, w, lanes, ins):
            data[order[sel]] = u8[off[:, None] + np.arange(w)]
        del pos
        return data

    def gstore(self, a, data, lanes, ins):
        """Write data[(lanes, w)] to global memory at a[lane] for each lane."""
        w = data.shape[1]
        order = np.empty(self.n, np.int64)
        order[lanes] = np.arange(len(lanes))
        self.counts["gstore.bytes"] += len(lanes) * w
        if self.cur_taint is not None:       # bytes whose value came out of tcgen05.ld (or wgmma)
            self.counts[f"gstore.from.{self.taint_source}.bytes"] += w * int(np.count_nonzero(self.cur_taint[lanes]))
        for sel, u8, off in self._regions_of(a, w, lanes, ins, write=True):
            u8[off[:, None] + np.arange(w)] = data[order[sel]]
        if self.tensormap_objs:              # a copy of a tensor map's bytes (judge.model.tensormaps)
            tensormaps.note_global_store(self, a, data, lanes)

    # shared memory
    def smem_split(self, a, lanes, ins, cluster_ok, data=True):
        """shared(::cta or ::cluster) addresses -> (cta index per lane, offset per lane); data=False for an
        address that names no data written (st.async's mbarrier), which dsmem.peer does not count."""
        a = a[lanes].astype(np.int64)
        rank = (a >> CLUSTER_SHIFT) - 1
        own = rank < 0
        cta = np.where(own, self.cta[lanes], rank)
        off = a & ((1 << CLUSTER_SHIFT) - 1)
        if not cluster_ok and not own.all():
            self.fail("shared-window", ins, "a shared::cta access with a shared::cluster address (from mapa)")
        if (cta >= self.ncta).any():
            self.fail("shared-window", ins, "a shared::cluster address of a block outside the cluster")
            raise checks.abort(self, "shared-window", ins, "shared::cluster address outside the cluster")
        if self.ncta > 1 and not own.all():
            # a shared::cluster address of the block's own rank (mapa to %cluster_ctarank) is a local access
            # (PTX ISA, mapa; 5.1.5.1 the .shared::cluster window holds the executing block's own window)
            far = cta != self.cta[lanes]
            if self.cta_done[cta[far]].any():
                k = int(np.argmax(self.cta_done[cta] & far))
                self.fail("dsmem-after-exit", ins,
                          f"{self.tdesc(lanes[k])} accesses the shared memory of block rank {int(cta[k])} at "
                          f"{self.where(ins)}, after every thread of that block exited: its shared memory is "
                          f"gone. A cluster barrier (cluster.sync()) before the owner exits keeps it alive")
            self.remote_t[cta[far], lanes[far]] = self.gtime
        if data and self.ncta > 1 and ins.parts[0] in ("st", "atom", "red"):
            peer = int(np.count_nonzero(cta != self.cta[lanes]))
            if peer:                 # the feature carrying the data: writes that reach another block
                self.counts["dsmem.peer"] += peer
        return cta, off

    # ------------------------------------------------------------------ waiting (instruction families)
    def wait_on(self, lanes, why):
        """Threads `lanes` wait; `why` = (kind, key) as the scheduler reports it in a Hang."""
        self.blocked[lanes] = True
        for t in np.atleast_1d(lanes):
            self.block_why[int(t)] = why

    def release(self, lanes, why):
        """Threads of `lanes` that wait for `why` go on."""
        for t in np.atleast_1d(lanes):
            if self.block_why.get(int(t)) == why:
                self.blocked[t] = False
                del self.block_why[int(t)]

    def wg_rows(self, c, w):
        """The threads of warpgroup w (128 consecutive threads) of block rank c."""
        lo = c * self.nthr_cta + 128 * w
        return np.arange(lo, min(lo + 128, (c + 1) * self.nthr_cta))

    def cta_suffix(self, c):
        """' of block rank c' in a cluster of several blocks, else ''."""
        return f" of block rank {c}" if self.ncta > 1 else ""


    def words_of(self, off, w):
        """The 4-byte shared words that a w-byte access at each offset covers: (lanes, words)."""
        nw = max(1, w // 4)
        return (off // 4)[:, None] + np.arange(nw)


    def is_pred(self, name):
        """Is this register a predicate?"""
        v = self.regs.get(name)
        if v is not None:
            return v.dtype == np.bool_
        return (self.k.regs.get(name) or self.k.regs.get(name.rstrip("0123456789"))) == "pred"


