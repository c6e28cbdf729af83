"""judge.model.machine - the interpreter: every thread of a cluster's blocks, lanes as NumPy elements.

Used through judge.model.run (read judge/model/__init__.py for the rules it enforces).
Threads are lanes of NumPy arrays; each has its own PC. The group of runnable threads at the
lowest PC executes one instruction together (predicates and divergence become masks). A thread
that waits (bar.sync, an mbarrier wait that cannot succeed yet) is blocked until it may go on.

Happens-before is tracked with vector clocks: VC[b, a] >= t means thread b has synchronized with
what thread a did up to time t (through bar.sync / barrier.sync, or an mbarrier arrive -> wait).
Extra columns stand for the asynchronous agents: one per mbarrier (the TMA bytes it completes).
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from judge.model import ptx as _ptx

SHARED_BASE = 0x9000_0000_0000_0000     # generic address of shared offset 0 (cvta.shared)
PARAM_BASE = 0xB000_0000_0000_0000      # generic address of the kernel parameter buffer
LOCAL_BASE = 0xA000_0000_0000_0000
CLUSTER_SHIFT = 24                       # mapa: shared::cluster address = ((rank + 1) << 24) | offset
POISON32 = 0x7FC0DEAD                    # a quiet NaN: what a read of unlanded bytes returns
N_MBAR_COLS = 64

# shared-memory word states
PLAIN, CPA_PENDING, CPA_LANDED, TMA_LANDED, GENERIC, TMA_PENDING, FENCED = range(7)

DT = {"b8": np.uint8, "u8": np.uint8, "s8": np.int8, "b16": np.uint16, "u16": np.uint16,
      "s16": np.int16, "f16": np.float16, "bf16": np.uint16, "b32": np.uint32, "u32": np.uint32,
      "s32": np.int32, "f32": np.float32, "b64": np.uint64, "u64": np.uint64, "s64": np.int64,
      "f64": np.float64, "pred": np.bool_, "f16x2": np.uint32, "bf16x2": np.uint32}
STORE = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
TYPES = set(DT)


class Violation(Exception):
    """A rule of the PTX memory model or of an asynchronous unit was broken: verdict WRONG."""

    def __init__(self, rule: str, where: str, message: str):
        self.rule, self.where, self.message = rule, where, message
        super().__init__(f"[{rule}] {message}")


class Hang(Exception):
    """Every live thread waits on something that can never happen (or the budget ran out)."""

    def __init__(self, message: str, graph: list | None = None):
        self.message, self.graph = message, graph or []
        super().__init__(message)


class Unsupported(Exception):
    """The model does not know this PTX instruction (or form): it cannot judge the kernel."""

    def __init__(self, instruction: str, why: str = ""):
        self.instruction = instruction
        super().__init__(f"the CPU model does not support `{instruction}`" + (f": {why}" if why else ""))


def _types(parts):
    return [p for p in parts if p in TYPES]


class Machine:
    def __init__(self, module, kernel, *, grid, block, cluster, args, shared_bytes, budget,
                 strict, seed, source_name):
        self.mod, self.k = module, kernel
        self.grid, self.block, self.cluster = grid, block, cluster
        self.strict, self.budget = strict, budget
        self.rng = np.random.default_rng(seed)
        self.counts = Counter()
        self.timeline = []
        self.violations = []
        self.source_name = source_name
        self.main_files = {n for n, p in module.files.items()
                           if "site-packages" not in p and "/include/" not in p.replace("judge/include", "")}
        self._setup_globals(args)
        self._setup_shared(shared_bytes)

    # ------------------------------------------------------------------ memory setup
    def _setup_globals(self, args):
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
                raw = b"\0" * size
            elif isinstance(a, (np.generic, int, float)):
                raw = np.asarray(a).tobytes() if isinstance(a, np.generic) else None
                if raw is None:
                    raise TypeError(f"argument {pname}: pass NumPy scalars (np.int32(n)), not {type(a).__name__}")
            else:
                raise TypeError(f"argument {pname}: NumPy arrays, NumPy scalars or judge.hw.tma maps, "
                                f"not {type(a).__name__}")
            if len(raw) != size:
                raise TypeError(f"argument {pname} is {size} bytes in the kernel, {len(raw)} given")
            self.sym[pname] = PARAM_BASE + off
            self.sym_space[pname] = "param"
            buf.extend(raw)
            off += size
        self.param = np.frombuffer(bytes(buf) + b"\0" * 8, np.uint8).copy()
        # a tensor map's tensor is global memory too (the caller keeps the array alive)
        import ctypes
        for spec in self.tmaps.values():
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
        for v in list(self.mod.vars) + list(self.k.shared):
            if v.space != "shared":
                continue
            if v.extern:
                ext.append(v)
                continue
            off = -(-off // max(v.align, 1)) * max(v.align, 1)
            self.sym[v.name] = off
            self.sym_space[v.name] = "shared"
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

    # ------------------------------------------------------------------ where
    def where(self, ins) -> str:
        src = ""
        if ins.loc:
            chain = [(f, l) for f, l in ins.loc]
            mine = [(f, l) for f, l in chain if f in self.main_files]
            if mine:
                f, l = mine[0]
                src = f"{self.source_name}:{l}"
                if len(mine) > 1:
                    src += " (inlined at line " + ", line ".join(str(x[1]) for x in mine[1:]) + ")"
        return f"{src} [PTX line {ins.line}: {ins.text}]" if src else f"PTX line {ins.line}: {ins.text}"

    def fail(self, rule, ins, message):
        tc = getattr(self, "tc", None)
        if tc is not None and tc.notes:           # what the tcgen05 model saw that explains the failure
            message += ". Note: " + "; ".join(tc.notes)
        v = Violation(rule, self.where(ins), message)
        self.violations.append(v)
        self.event("violation", rule=rule, where=self.where(ins))
        if self.strict:
            raise v

    def event(self, kind, **kw):
        if len(self.timeline) < 20000:
            kw["t"] = self.gtime
            kw["kind"] = kind
            self.timeline.append(kw)

    def tdesc(self, t):
        t = int(t)
        c, lt = divmod(t, self.nthr_cta)
        s = f"thread {lt} (warp {lt // 32})"
        return s + (f" of block rank {c}" if self.ncta > 1 else "")

    # ------------------------------------------------------------------ run one cluster
    def run_cluster(self, cluster_origin):
        bx, by, bz = self.block
        cx, cy, cz = self.cluster
        self.nthr_cta = bx * by * bz
        self.ncta = cx * cy * cz
        n = self.nthr_cta * self.ncta
        self.n = n
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
            "%dynamic_smem_size": np.full(n, self.smem_size - self.static_smem - 16, u32),
            "%total_smem_size": np.full(n, self.smem_size, u32),
        }
        self.sreg["%lanemask_gt"] = (~self.sreg["%lanemask_le"]).astype(u32)
        self.sreg["%lanemask_ge"] = (~self.sreg["%lanemask_lt"]).astype(u32)
        self.sreg["%tid"] = self.sreg["%tid.x"]
        self.lt = lt
        self.regs = {}
        self.pc = np.zeros(n, np.int64)
        self.alive = np.ones(n, bool)
        self.blocked = np.zeros(n, bool)
        self.block_why = {}                   # thread -> (kind, key)
        W = self.smem_size // 4
        self.sm = np.zeros((self.ncta, self.smem_size), np.uint8)
        self.sm[:] = np.frombuffer(np.uint32(POISON32).tobytes() * (self.smem_size // 4), np.uint8)
        self.smw = self.sm.view(np.uint32)
        self.w_state = np.zeros((self.ncta, W), np.int8)
        self.w_thread = np.full((self.ncta, W), -1, np.int32)
        self.w_time = np.zeros((self.ncta, W), np.int64)
        self.w_group = np.zeros((self.ncta, W), np.int32)
        self.w_pc = np.zeros((self.ncta, W), np.int32)
        # the last time each warp (of the whole cluster) read each shared word, and where
        self.nwarps = -(-n // 32)
        self.r_wt = np.zeros((self.ncta, W, self.nwarps), np.int64)
        self.r_pc = np.zeros((self.ncta, W), np.int32)
        self.bulk_reading = np.zeros((self.ncta, W), np.int16)
        self.w_atomic = np.zeros((self.ncta, W), bool)      # last write was an atomic (atomics do not race)
        self.remote_t = np.zeros((self.ncta, n), np.int64)  # DSMEM: last access of each thread into block c
        self.cta_done = np.zeros(self.ncta, bool)
        self.local = np.zeros((n, max(self.local_size, 8)), np.uint8)
        self.VC = np.zeros((n, n + N_MBAR_COLS), np.int64)
        self.gtime = 1
        # cp.async
        self.ncommit = np.zeros(n, np.int64)
        self.cover = np.full(n, -1, np.int64)
        self.last_wait_n = np.full(n, -1, np.int64)
        self.cpa = []                         # pending copies: dict(threads, words, data, group, pc, cta)
        # bulk async groups (TMA / bulk stores)
        self.nbulk = np.zeros(n, np.int64)
        self.bulk = []                        # pending bulk stores
        # barriers
        self.bars = {}                        # (cta, id) -> dict(arrived mask, expected)
        # mbarriers
        self.mbars = {}                       # (cta, offset) -> dict
        self.wg_fence = np.full(n, -1, np.int64)     # wgmma: last wgmma.fence per thread
        self.wg_ncommit = np.zeros(n, np.int64)
        self.wg_ops = []
        self.acc_pending = {}                        # register -> lanes whose wgmma has not completed
        self.acc_names = set()
        self.wg_written = {}
        self.cur_mask = np.ones(n, bool)
        self.cpa_seq = np.zeros(n, np.int64)
        self.cpa_arrivals = []                # cp.async.mbarrier.arrive still waiting on copies
        self.cl_count = np.zeros(n, np.int64)
        self.cl_acc = {}
        self.mbar_by_col = {}
        self.next_col = n
        self.steps = 0
        self.cur_pc = 0
        self.tc = None                        # tcgen05 / tensor memory (judge.model.tcgen05), at first use
        self.taint = {}                       # register -> lanes whose value came from a tcgen05.ld
        self.cur_taint = None                 # lanes of the current instruction that read a marked value
        self._exec_loop()
        self._finish()

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
                self._early_acc(name, ins, "read")
            if self.tc is not None and name in self.tc.ld_pending and (self.tc.ld_pending[name] & self.cur_mask).any():
                from judge.model import tcgen05
                tcgen05.early_register(self, name, ins, "read")
            if self.taint and name in self.taint:         # the value came from tensor memory: so does the result
                self.cur_taint = self.taint[name].copy() if self.cur_taint is None else self.cur_taint | self.taint[name]
            if name in self.regs:
                v = self.regs[name]
            elif name in self.sreg:
                v = self.sreg[name]
            elif name in ("%clock", "%clock64", "%globaltimer", "%globaltimer_lo", "%globaltimer_hi"):
                # time advances with the model's steps (32 "ns" or cycles a step): spin loops end
                v = np.full(self.n, 32 * self.gtime, np.uint64 if name in ("%clock64", "%globaltimer") else np.uint32)
            elif name.startswith("%"):
                v = self.regs.setdefault(name, np.zeros(self.n, self._store_dtype(name, ty)))
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

    def _early_acc(self, name, ins, what):
        ins = ins or self.k.code[self.cur_pc]
        t = int(np.nonzero(self.acc_pending[name] & self.cur_mask)[0][0])
        op = next((o for o in self.wg_ops if name in o["names"] and t in set(o["lanes"].tolist())), None)
        self.fail("wgmma-accumulator", ins,
                  f"{self.tdesc(t)} {what}s accumulator register {name} at {self.where(ins)} while the "
                  f"wgmma.mma_async writing it"
                  + (f" (issued at {self.where(self.k.code[op['pc']])})" if op else "")
                  + " may still be running: wgmma.commit_group, then wgmma.wait_group must cover it first")

    def wr(self, op, val, mask, full, internal=False):
        if op.kind == "sink":
            return
        if op.kind != "reg":
            raise Unsupported(str(op), "destination is not a register")
        name = op.name
        if not internal and self.acc_names and name in self.acc_names:
            if name in self.acc_pending and (self.acc_pending[name] & mask).any():
                self._early_acc(name, None, "write")
            w = self.wg_written.setdefault(name, np.full(self.n, -1, np.int64))
            w[mask] = self.gtime
        if not internal and self.tc is not None and name in self.tc.ld_pending and (self.tc.ld_pending[name] & mask).any():
            from judge.model import tcgen05
            tcgen05.early_register(self, name, None, "write")
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
                raise Violation("global-bounds", self.where(ins), "out-of-bounds global access")
            out.append((sel, u8, off))
        return out

    def gload(self, a, w, lanes, ins):
        data = np.zeros((len(lanes), w), np.uint8)
        pos = {int(t): i for i, t in enumerate(lanes)} if len(lanes) < 0 else None
        order = np.empty(self.n, np.int64)
        order[lanes] = np.arange(len(lanes))
        for sel, u8, off in self._regions_of(a, w, lanes, ins):
            data[order[sel]] = u8[off[:, None] + np.arange(w)]
        del pos
        return data

    def gstore(self, a, data, lanes, ins):
        w = data.shape[1]
        order = np.empty(self.n, np.int64)
        order[lanes] = np.arange(len(lanes))
        self.counts["gstore.bytes"] += len(lanes) * w
        if self.cur_taint is not None:       # bytes whose value came out of tensor memory (tcgen05.ld)
            self.counts["gstore.from.tcgen05.ld.bytes"] += w * int(np.count_nonzero(self.cur_taint[lanes]))
        for sel, u8, off in self._regions_of(a, w, lanes, ins, write=True):
            u8[off[:, None] + np.arange(w)] = data[order[sel]]

    # shared memory
    def smem_split(self, a, lanes, ins, cluster_ok):
        """shared(::cta or ::cluster) addresses -> (cta index per lane, offset per lane)."""
        a = a[lanes].astype(np.int64)
        rank = (a >> CLUSTER_SHIFT) - 1
        own = rank < 0
        cta = np.where(own, self.cta[lanes], rank)
        off = a & ((1 << CLUSTER_SHIFT) - 1)
        if not cluster_ok and not own.all():
            self.fail("shared-window", ins, "a shared::cta access with a shared::cluster address (from mapa)")
        if (cta >= self.ncta).any():
            self.fail("shared-window", ins, "a shared::cluster address of a block outside the cluster")
            raise Violation("shared-window", self.where(ins), "shared::cluster address outside the cluster")
        if self.ncta > 1 and not own.all():
            far = ~own
            if self.cta_done[cta[far]].any():
                k = int(np.argmax(self.cta_done[cta] & far))
                self.fail("dsmem-after-exit", ins,
                          f"{self.tdesc(lanes[k])} accesses the shared memory of block rank {int(cta[k])} at "
                          f"{self.where(ins)}, after every thread of that block exited: its shared memory is "
                          f"gone. A cluster barrier (cluster.sync()) before the owner exits keeps it alive")
            self.remote_t[cta[far], lanes[far]] = self.gtime
        return cta, off

    def check_cross(self, cta, words, thr, ins, atomic):
        """DSMEM ordering: an access and the last write of a word, made by threads of different blocks
        of the cluster, must be ordered (cluster barrier, mbarrier) unless both are atomics."""
        wt = self.w_thread[cta[:, None], words]
        T = np.broadcast_to(thr[:, None], words.shape)
        real = (wt >= 0) & (wt < self.n)
        cross = real & ((np.where(real, wt, 0) // self.nthr_cta) != (T // self.nthr_cta))
        if atomic:
            cross &= ~self.w_atomic[cta[:, None], words]
        if not cross.any():
            return
        C = np.broadcast_to(cta[:, None], words.shape)
        ok = self.know(T[cross], wt[cross], self.w_time[C[cross], words[cross]])
        if ok.all():
            return
        k = int(np.argmin(ok))
        t, w, c, wd = int(T[cross][k]), int(wt[cross][k]), int(C[cross][k]), int(words[cross][k])
        self.fail("dsmem-unordered", ins,
                  f"{self.tdesc(t)} accesses shared [0x{4 * wd:x}] of block rank {c} at {self.where(ins)}, "
                  f"which {self.tdesc(w)} wrote with no cluster barrier (or mbarrier) ordering the two: "
                  f"the access may see the value before that write, or be overwritten by it. Put a "
                  f"cluster.sync() between them")

    def check_smem_range(self, off, w, lanes, ins):
        if (off < 0).any() or (off + w > self.smem_size - 16).any():
            bad = int(np.argmax((off < 0) | (off + w > self.smem_size - 16)))
            self.fail("shared-bounds", ins, f"{self.tdesc(lanes[bad])} accessed shared memory at offset "
                      f"{int(off[bad])} (+{w} bytes), beyond the {self.smem_size - 16} bytes this "
                      f"launch has (static {self.static_smem} + dynamic)")
            raise Violation("shared-bounds", self.where(ins), "shared memory out of range")
        if (off % min(w, 16)).any():
            bad = int(np.argmax(off % min(w, 16) != 0))
            self.fail("alignment", ins, f"{self.tdesc(lanes[bad])}: a {w}-byte shared access at offset "
                      f"{int(off[bad])} is not {min(w, 16)}-byte aligned")

    def words_of(self, off, w):
        nw = max(1, w // 4)
        return (off // 4)[:, None] + np.arange(nw)

    def know(self, readers, writers, times):
        """Does each reader thread know the writer's events up to time (vector clocks)?"""
        return (readers == writers) | (self.VC[readers, writers] >= times)

    def check_read(self, cta, words, thr, ins, proxy="generic"):
        """Thread thr (per row) reads words: each must hold landed, visible bytes."""
        st = self.w_state[cta[:, None], words]
        if not ((st == CPA_PENDING) | (st == TMA_PENDING) | (st == CPA_LANDED) | (st == TMA_LANDED)).any():
            return None
        T = np.broadcast_to(thr[:, None], words.shape)
        C = np.broadcast_to(cta[:, None], words.shape)
        bad = np.zeros(words.shape, bool)         # words this read may not see: they read as poison
        for state in (CPA_PENDING, TMA_PENDING, CPA_LANDED, TMA_LANDED):
            hit = st == state
            if not hit.any():
                continue
            if state in (CPA_PENDING, TMA_PENDING):
                bad |= hit
            else:
                okw = np.ones(words.shape, bool)
                okw[hit] = self.know(T[hit], self.w_thread[C[hit], words[hit]], self.w_time[C[hit], words[hit]])
                bad |= ~okw
            i, j = np.argwhere(hit)[0] if state in (CPA_PENDING, TMA_PENDING) else (None, None)
            if state == CPA_PENDING:
                self._bad_pending_read(ins, int(T[i, j]), int(C[i, j]), int(words[i, j]))
                continue
            if state == TMA_PENDING:
                c, w = int(C[i, j]), int(words[i, j])
                mb = self.mbar_by_col.get(int(self.w_thread[c, w]))
                self.fail("tma-read-before-complete", ins,
                          f"{self.tdesc(T[i, j])} read shared [0x{4 * w:x}] before the mbarrier phase "
                          f"that completes the TMA load writing it"
                          + (f" (mbarrier at shared 0x{mb['off']:x}, now in phase {mb['phase']})" if mb else "")
                          + ": wait on the mbarrier (try_wait.parity) before reading the tile")
                continue
            wt = self.w_thread[C[hit], words[hit]]
            tt = self.w_time[C[hit], words[hit]]
            ok = self.know(T[hit], wt, tt)
            if ok.all():
                continue
            k = int(np.argmin(ok))
            r, c, w = int(T[hit][k]), int(C[hit][k]), int(words[hit][k])
            if state == CPA_LANDED:
                self.fail("cp.async-visibility", ins,
                          f"{self.tdesc(r)} read shared [0x{4 * w:x}] at {self.where(ins)}, written by "
                          f"{self.tdesc(wt[k])}'s cp.async (group {int(self.w_group[c, w])}), which that "
                          f"thread's wait_group completed at {self.where(self.k.code[int(self.w_pc[c, w])])}"
                          f" - but no barrier between that wait and this read: cp.async.wait_group "
                          f"covers only the calling thread's own copies; add __syncthreads() after it")
            else:
                mb = self.mbar_by_col.get(int(wt[k]))
                self.fail("tma-visibility", ins,
                          f"{self.tdesc(r)} read shared [0x{4 * w:x}], written by a TMA load that completed "
                          f"phase {int(self.w_group[c, w])} of the mbarrier at shared "
                          f"0x{mb['off'] if mb else 0:x}, without having waited on that phase (nor "
                          f"synchronized with a thread that did)")
        return bad

    def _bad_pending_read(self, ins, t, c, w):
        issuer = int(self.w_thread[c, w])
        g = int(self.w_group[c, w])
        where_issue = self.where(self.k.code[int(self.w_pc[c, w])])
        if issuer == t:
            if self.last_wait_n[t] < 0:
                why = "this thread has executed no cp.async.wait_group yet"
            else:
                why = (f"its last cp.async.wait_group {int(self.last_wait_n[t])} covered groups "
                       f"<= {int(self.cover[t])} only (groups are numbered from 0 in commit order)")
            if g >= self.ncommit[t]:
                why += "; the group is not even committed yet"
            self.fail("cp.async-wait", ins,
                      f"{self.tdesc(t)} read shared [0x{4 * w:x}] at {self.where(ins)} before the cp.async "
                      f"group that writes it completed: the copy was issued at {where_issue} into group "
                      f"{g}, and {why}")
        else:
            self.fail("cp.async-wait", ins,
                      f"{self.tdesc(t)} read shared [0x{4 * w:x}] at {self.where(ins)} while "
                      f"{self.tdesc(issuer)}'s cp.async (group {g}, issued at {where_issue}) into it may "
                      f"still be in flight: that thread has not waited for the group "
                      f"(cp.async.wait_group in the issuing thread, then a barrier; or cp.async.mbarrier.arrive "
                      f"and a wait on that mbarrier)")

    def note_read(self, cta, words, thr, pc):
        C = np.broadcast_to(cta[:, None], words.shape)
        Wp = np.broadcast_to((thr // 32)[:, None], words.shape)
        self.r_wt[C, words, Wp] = self.gtime
        self.r_pc[C, words] = pc

    def check_overwrite(self, cta, words, thr, ins, what):
        """An asynchronous write into words: no other thread may still be reading them. The writer
        must be ordered after each warp's last read (knowing one lane of that warp up to the read:
        lenient where a warp hands a buffer back through one lane without __syncwarp)."""
        rt = self.r_wt[cta[:, None], words]                      # (lanes, words, warps)
        if rt.any():
            for i in range(len(thr)):
                t = int(thr[i])
                row = self.VC[t, :self.n].copy()
                row[t] = self.gtime
                pad = (-len(row)) % 32
                know = np.concatenate([row, np.full(pad, -1)]).reshape(-1, 32).max(axis=1)
                bad = rt[i] > know[None, :]
                if bad.any():
                    j, w = np.argwhere(bad)[0]
                    c, word = int(cta[i]), int(words[i, j])
                    self.fail("async-overwrite-race", ins,
                              f"{self.tdesc(t)}'s {what} at {self.where(ins)} overwrites shared "
                              f"[0x{4 * word:x}], which warp {w % (self.nthr_cta // 32 or 1)}"
                              f"{' of block rank ' + str(w * 32 // self.nthr_cta) if self.ncta > 1 else ''} "
                              f"read at {self.where(self.k.code[int(self.r_pc[c, word])])} with no barrier "
                              f"in between: that warp may still be reading the old data. A barrier (or an "
                              f"mbarrier arrive -> wait) must separate the last read of a buffer from the "
                              f"copy that refills it")
                    break
        st = self.w_state[cta[:, None], words]
        if (st == CPA_PENDING).any() or (st == TMA_PENDING).any():
            i, j = np.argwhere((st == CPA_PENDING) | (st == TMA_PENDING))[0]
            self.fail("async-overwrite-race", ins,
                      f"{self.tdesc(thr[i])}'s {what} writes shared [0x{4 * int(words[i, j]):x}] while an "
                      f"earlier asynchronous copy into it is still in flight")
        if (self.bulk_reading[cta[:, None], words] > 0).any():
            i, j = np.argwhere(self.bulk_reading[cta[:, None], words] > 0)[0]
            self.fail("async-read-overwritten", ins,
                      f"{self.tdesc(thr[i])}'s {what} at {self.where(ins)} overwrites shared "
                      f"[0x{4 * int(words[i, j]):x}] while an asynchronous read of it may still run (a TMA/bulk "
                      f"store before its cp.async.bulk.wait_group.read, a wgmma before the "
                      f"wgmma.wait_group that covers it, or a tcgen05.mma before its tcgen05.commit's "
                      f"mbarrier phase was waited for)")

    # ------------------------------------------------------------------ the loop
    # instructions that cannot change which threads run next (no branch, barrier, wait or arrival)
    _SAFE = frozenset("add sub mul mad fma div rem min max and or xor not neg abs cnot rcp sqrt rsqrt ex2 lg2 "
                      "sin cos tanh popc clz brev shl shr setp selp mov cvt cvta bfe lop3 prmt shf ld ldu st "
                      "shfl vote activemask mapa getctarank membar nanosleep prefetch prefetchu".split())

    def _exec_loop(self):
        code = self.k.code
        ncode = len(code)
        big = np.int64(1 << 60)
        handlers = {}
        conv = None                       # (pc, active, count) while every runnable thread is at one pc
        safe = self._SAFE
        while True:
            if conv is None:
                runnable = self.alive & ~self.blocked
                if not runnable.any():
                    if not self.alive.any():
                        break
                    self._all_blocked()
                    continue
                pcs = np.where(runnable, self.pc, big)
                p = int(pcs.min())
                active = pcs == p
                nrun = int(np.count_nonzero(runnable))
                nall = int(np.count_nonzero(active))
                together = nall == nrun
            else:
                p, active, nall = conv
                together = True
            if p >= ncode:
                self.alive[active] = False
                self._on_exit(active, code[-1])
                conv = None
                continue
            ins = code[p]
            self.cur_pc = p
            self.steps += 1
            if self.steps > self.budget:
                self._budget_hang(ins)
            if ins.guard is not None:
                mask = active & self.rd(ins.guard, "pred", ins)
                nact = int(np.count_nonzero(mask))
            else:
                mask, nact = active, nall
            self.counts["instructions"] += nact
            self.pc[active] = p + 1
            conv = (p + 1, active, nall) if together and ins.parts[0] in safe else None
            if nact == 0:
                continue
            h = handlers.get(p)
            if h is None:
                h = handlers[p] = self._handler(ins)
            self.cur_mask = mask
            self.cur_taint = None
            h(ins, mask, nact == self.n)
            self.gtime += 1

    def _handler(self, ins):
        from judge.model import ops
        return ops.handler(self, ins)

    def _budget_hang(self, ins):
        # Blocks of different clusters run one after another here. A kernel that waits for another
        # block through global memory (a flag, a counter) would spin forever in the model although
        # it finishes on a GPU: with such instructions and more than one cluster, give no verdict.
        clusters = int(np.prod([g // c for g, c in zip(self.grid, self.cluster)]))
        sync_like = [i for i in self.k.code if i.parts[0] in ("atom", "red") and "shared" not in "".join(i.parts)
                     or i.parts[0] == "ld" and any(q in i.parts for q in ("acquire", "volatile", "relaxed"))
                     and not any(q.startswith("shared") for q in i.parts)]
        if clusters > 1 and sync_like:
            raise Unsupported(sync_like[0].text, "the kernel ran past the step budget and may be waiting for "
                              "another block through global memory; the model runs one cluster at a time")
        live = np.nonzero(self.alive)[0]
        pcs = Counter(int(self.pc[t]) - 1 for t in live if not self.blocked[t])
        where = "; ".join(f"{n} threads at {self.where(self.k.code[max(p, 0)])}" for p, n in pcs.most_common(3))
        raise Hang(f"the block ran {self.budget} instruction groups without finishing: a loop that never "
                   f"ends (the threads were last at {where})",
                   [{"thread": int(t), "pc": int(self.pc[t])} for t in live[:8]])

    def _all_blocked(self):
        # Nothing can run. Lazy asynchronous completions that the hardware would eventually perform:
        # cp.async.mbarrier.arrive arrivals still waiting on their copies.
        if self._flush_cpasync_arrivals():
            return
        graph, lines = [], []
        seen = set()
        for t in np.nonzero(self.alive)[0]:
            kind, key = self.block_why.get(int(t), ("?", None))
            if (kind, key) in seen:
                continue
            seen.add((kind, key))
            who = np.nonzero(self.alive & np.array([self.block_why.get(int(u), (None, None)) == (kind, key)
                                                    for u in range(self.n)]))[0]
            if kind == "bar":
                c, bid = key
                b = self.bars.get(key, {})
                arrived = int(np.count_nonzero(b.get("mask", np.zeros(self.n, bool))))
                exp = b.get("expected", 0)
                rows = np.arange(c * self.nthr_cta, (c + 1) * self.nthr_cta)
                missing = rows[self.alive[rows] & ~b.get("mask", np.zeros(self.n, bool))[rows]]
                msg = (f"{len(who)} threads wait at barrier {bid} of block rank {c} ({arrived} of {exp} arrived); "
                       + (f"{len(missing)} live threads never arrive there (e.g. {self.tdesc(missing[0])}, "
                          f"blocked on {self.block_why.get(int(missing[0]), ('?',))[0]})" if len(missing) else
                          "the rest have exited"))
                graph.append({"waiters": who.tolist(), "on": f"barrier {bid}", "block": c,
                              "arrived": arrived, "expected": exp})
            elif kind == "mbar":
                mb, parity = key
                m = self.mbars[mb]
                msg = (f"{len(who)} threads ({self.tdesc(who[0])}, ...) wait for phase parity {parity} of the "
                       f"mbarrier at shared 0x{m['off']:x} (block rank {m['cta']}), now in phase {m['phase']}: "
                       f"{m['pending']} of {m['count']} arrivals missing, tx-count {m['tx']} bytes "
                       f"outstanding (expected {m['tx_expected']} bytes this phase, delivered "
                       f"{m['tx_done']})")
                graph.append({"waiters": who.tolist(), "on": f"mbarrier 0x{m['off']:x}", "parity": parity,
                              "phase": m["phase"], "pending_arrivals": m["pending"], "tx_missing": m["tx"]})
            elif kind == "cluster":
                missing = np.nonzero(self.alive & (self.cl_count <= key))[0]
                msg = (f"{len(who)} threads wait at barrier.cluster.wait (cluster barrier phase {key}); "
                       f"{len(missing)} live threads of the cluster never arrive there"
                       + (f" (e.g. {self.tdesc(missing[0])}, blocked on "
                          f"{self.block_why.get(int(missing[0]), ('?',))[0]})" if len(missing) else ""))
                graph.append({"waiters": who.tolist(), "on": "barrier.cluster", "phase": key,
                              "missing": missing.tolist()})
            else:
                msg = f"{len(who)} threads blocked ({kind})"
                graph.append({"waiters": who.tolist(), "on": kind})
            lines.append(msg)
        raise Hang("every live thread is blocked:\n  " + "\n  ".join(lines), graph)

    def _flush_cpasync_arrivals(self):
        from judge.model import tcgen05          # a tcgen05.commit's arrival, due once nothing else can run
        return tcgen05.flush_commits(self)

    def _is_pred(self, name):
        v = self.regs.get(name)
        if v is not None:
            return v.dtype == np.bool_
        return (self.k.regs.get(name) or self.k.regs.get(name.rstrip("0123456789"))) == "pred"

    # ------------------------------------------------------------------ cp.async completion
    def cpa_land(self, mask, limit, ins, upto_seq=None):
        """Land the copies of threads in mask whose group < limit[thread] (or seq < upto_seq)."""
        keep = []
        for r in self.cpa:
            lanes = r["lanes"]
            if upto_seq is not None:
                sel = mask[lanes] & (r["seq"] < upto_seq[lanes])
            else:
                sel = mask[lanes] & (r["group"] < limit[lanes])
            if sel.any():
                cta, off, data, words = r["cta"][sel], r["off"][sel], r["data"][sel], r["words"][sel]
                self.sm[cta[:, None], off[:, None] + np.arange(data.shape[1])] = data
                C = cta[:, None]
                self.w_state[C, words] = CPA_LANDED
                self.w_thread[C, words] = lanes[sel][:, None]
                self.w_time[C, words] = self.gtime
                self.w_pc[C, words] = self.cur_pc
                self.event("land", what="cp.async", threads=int(sel.sum()))
            if (~sel).any():
                if sel.any():
                    r = {k: (v[~sel] if isinstance(v, np.ndarray) else v) for k, v in r.items()}
                keep.append(r)
        self.cpa = keep

    # ------------------------------------------------------------------ barriers
    def join(self, members, receivers):
        """members release (their clocks, own entry = now), receivers acquire the join."""
        ms = np.nonzero(members)[0]
        rows = self.VC[ms].copy()
        rows[np.arange(len(ms)), ms] = self.gtime
        j = rows.max(axis=0)
        rs = np.nonzero(receivers)[0]
        np.maximum(self.VC[rs], j, out=self.VC[rs]) if False else None
        self.VC[rs] = np.maximum(self.VC[rs], j)
        self.VC[rs, rs] = np.maximum(self.VC[rs, rs], self.gtime)

    def _try_release_bar(self, key, ins):
        b = self.bars.get(key)
        if b is None:
            return
        if key[0] == "warp":
            _, c, w = key
            done = int(np.count_nonzero(b["mask"])) >= b["expected"] or not (
                self.alive[c * self.nthr_cta + 32 * w: c * self.nthr_cta + 32 * w + 32] & ~b["mask"][
                    c * self.nthr_cta + 32 * w: c * self.nthr_cta + 32 * w + 32]).any()
            cta = c
        else:
            cta = key[0]
            rows = slice(cta * self.nthr_cta, (cta + 1) * self.nthr_cta)
            if b["expected"] is not None:
                done = int(np.count_nonzero(b["mask"])) >= b["expected"]
            else:
                done = not (self.alive[rows] & ~b["mask"][rows]).any()
            b["expected_now"] = b["expected"] if b["expected"] is not None else int(np.count_nonzero(self.alive[rows]))
        b.setdefault("expected_now", b["expected"])
        if not done:
            return
        del self.bars[key]
        self.join(b["mask"], b["waiters"])
        self.blocked[b["waiters"]] = False
        for t in np.nonzero(b["waiters"])[0]:
            self.block_why.pop(int(t), None)
        self.event("barrier", id=str(key), threads=int(np.count_nonzero(b["mask"])))
        if key[0] != "warp":
            rows = slice(cta * self.nthr_cta, (cta + 1) * self.nthr_cta)
            if not (self.alive[rows] & ~b["mask"][rows]).any():
                self._full_barrier(cta)

    def _full_barrier(self, c):
        """Every live thread of block c passed one barrier: what they did before is known to all."""
        rows = np.arange(c * self.nthr_cta, (c + 1) * self.nthr_cta)
        rows = rows[self.alive[rows]]
        if len(rows) == 0:
            return
        colmin = self.VC[rows].min(axis=0)
        st = self.w_state[c]
        for s in (CPA_LANDED, TMA_LANDED, FENCED):
            hit = st == s
            if hit.any():
                idx = np.nonzero(hit)[0]
                wt = self.w_thread[c, idx]
                ok = colmin[wt] >= self.w_time[c, idx]
                st[idx[ok]] = PLAIN
        if self.ncta == 1:
            self.r_wt[c] = 0
        else:                                   # only this block's warps are known to all of it
            self.r_wt[c][:, c * self.nthr_cta // 32:(c + 1) * self.nthr_cta // 32] = 0

    def _try_release_cluster(self, ins):
        """barrier.cluster.wait returns once every live thread of the cluster arrived for that phase."""
        for t in np.nonzero(self.blocked)[0]:
            why = self.block_why.get(int(t))
            if not why or why[0] != "cluster":
                continue
            k = why[1]
            if not (self.alive & (self.cl_count <= k)).any():
                self.VC[t] = np.maximum(self.VC[t], self.cl_acc.get(k, 0))
                self.blocked[t] = False
                self.block_why.pop(int(t), None)

    def _finish(self):
        # copies nobody waited for still land (their bytes are never read by the kernel);
        # stores still pending complete (the exit check above already reported a missing wait)
        for b in list(self.bulk):
            if not b["done"]:
                self._bulk_complete(b, self.k.code[-1])

    def _bulk_complete(self, b, ins):
        from judge.model import tma as T
        T.bulk_complete(self, b, ins)

    def _on_exit(self, mask, ins):
        ts = np.nonzero(mask)[0]
        if self.ncta > 1:
            for c in np.unique(self.cta[ts]):
                rows = np.arange(c * self.nthr_cta, (c + 1) * self.nthr_cta)
                if self.cta_done[c] or self.alive[rows].any():
                    continue
                self.cta_done[c] = True
                # every access of a peer into this block's shared memory must happen before it exits
                seen = self.VC[rows, :self.n].max(axis=0)
                late = self.remote_t[c] > seen
                if late.any():
                    t = int(np.argmax(late))
                    self.fail("dsmem-after-exit", ins,
                              f"block rank {c} exits at {self.where(ins)} with no cluster barrier after "
                              f"{self.tdesc(t)}'s access to its shared memory: a block may exit while "
                              f"peers still read or write its shared memory (DSMEM), and then the access "
                              f"faults. End with cluster.sync() so that no block leaves before its peers "
                              f"are done with it")
        for b in list(self.bulk):
            if b["thread"] in set(ts.tolist()) and not b["read"]:
                self.fail("exit-before-bulk-read", ins,
                          f"{self.tdesc(b['thread'])} exits at {self.where(ins)} while its bulk/TMA store "
                          f"(issued at {self.where(self.k.code[b['pc']])}) may still be reading shared "
                          f"memory: the block's shared memory is released when it exits. Wait with "
                          f"cp.async.bulk.wait_group.read 0 before exiting")
                self._bulk_complete(b, ins)
        if self.tc is not None:                  # tensor memory still allocated at exit
            from judge.model import tcgen05
            tcgen05.on_exit(self, ins)
        # a barrier the exited threads no longer block
        for key, b in list(self.bars.items()):
            self._try_release_bar(key, ins)
        if self.ncta > 1:
            self._try_release_cluster(ins)
