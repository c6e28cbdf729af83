"""judge.model.ptx - read the PTX text NVRTC produced into kernels the model can run.

    from judge.model import ptx
    mod = ptx.parse(build.ptx)
    k = mod.kernels["sgemm_pipelined"]      # .code: [Instr], .labels, .params, .shared, .regs

Each Instr keeps its PTX line and its source location chain from the `.loc` directives
(builds use -lineinfo): `.loc 2 62 3, function_name $L__info_string0, inlined_at 1 4 5` chains are
followed out to the kernel's own line, with the name of the function each line is in (read from the
.debug_str section), so a message can name the header line and the learner's line that called it
(judge.model.state.Machine.where; the file names are Module.files, from the `.file` directives).
Inline-asm scopes (`{ .reg .pred p; ... }`) get their registers and their labels renamed per scope
(PTX ISA 5.5.1 / 11.1: a label, like a register, is visible only in the block that declares it and in
the blocks nested in it, so an inline-asm wait loop with fixed labels, inlined twice, is two loops;
a branch resolves to the innermost enclosing block's label of that name, forward or backward).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_LOC = re.compile(r"\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:.*?function_name\s+([\w$]+))?"
                  r"(?:.*?inlined_at\s+(\d+)\s+(\d+)\s+(\d+))?")
_INFO_STRING = re.compile(r"^\s*([\w$]+):\s*\n((?:\s*\.b8\s+[\d,\s]+\n)+)", re.M)
_FILE = re.compile(r'\.file\s+(\d+)\s+"([^"]*)"')
_REGDECL = re.compile(r"\.reg\s+(?:\.v\d\s+)?\.(\w+)\s+(.+)")
_VARDECL = re.compile(r"\.(shared|global|const|local)\s+(.*?)([\w$.]+)\s*(?:\[(\d*)\])?\s*(?:=\s*(.+))?$", re.S)
_ALIGN = re.compile(r"\.align\s+(\d+)")
_TYPE = re.compile(r"\.(b8|u8|s8|b16|u16|s16|f16|bf16|b32|u32|s32|f32|b64|u64|s64|f64)\b")
TYPE_BYTES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
              "b32": 4, "u32": 4, "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8,
              "pred": 1, "f16x2": 4, "bf16x2": 4, "b128": 16}


@dataclass
class Operand:
    """One operand: a register, an immediate, an [address], a {vector}, a symbol, a label or `_`."""

    kind: str                 # reg, imm, fimm, addr, vec, sym, sink, label
    name: str = ""            # reg / sym / label name; addr: base register or symbol ("" = absolute)
    value: int = 0            # imm value; fimm bits; addr offset
    width: int = 0            # fimm: 4 or 8 bytes
    items: list = field(default_factory=list)   # vec items; addr with a vector: [tensor coords]
    neg: bool = False         # !%p


@dataclass
class Instr:
    """One PTX instruction with its guard, its operands and where it came from."""

    op: str                   # full opcode with modifiers, e.g. "cp.async.cg.shared.global"
    parts: list               # op split on '.' (modifiers like shared::cta stay whole)
    args: list                # Operands
    guard: Operand | None
    line: int                 # PTX line (1-based)
    loc: tuple                # ((file, line), ...) innermost first
    text: str
    funcs: tuple = ()         # the function each loc entry lies in (demangled; "" where the PTX names none)

    def has(self, *mods) -> bool:
        """Does the opcode carry every one of these modifiers?"""
        return all(m in self.parts for m in mods)


@dataclass
class Var:
    """A variable declared in a state space (.shared, .global, .const, .local)."""

    space: str
    name: str
    size: int
    align: int
    init: bytes | None = None
    extern: bool = False


@dataclass
class Kernel:
    """One .entry: its code, labels, parameters, registers and shared/local variables."""

    name: str
    params: list              # [(name, size, align)]
    code: list
    labels: dict
    regs: dict                # name or prefix -> type
    shared: list              # [Var] (kernel-local .shared, demoted)
    local: list
    cluster_dims: tuple | None = None     # __cluster_dims__ (.reqnctapercluster)


@dataclass
class Module:
    """A parsed PTX module: its kernels by name, module variables and .file names."""

    kernels: dict
    vars: list                # module-level Vars
    files: dict               # file number -> path


def _split_args(s: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _imm(tok: str) -> Operand | None:
    t = tok.strip()
    if re.fullmatch(r"0[fF][0-9a-fA-F]{8}", t):
        return Operand("fimm", value=int(t[2:], 16), width=4)
    if re.fullmatch(r"0[dD][0-9a-fA-F]{16}", t):
        return Operand("fimm", value=int(t[2:], 16), width=8)
    m = re.fullmatch(r"(-?)(0[xX][0-9a-fA-F]+|\d+)[uU]?", t)
    if m:
        v = int(m.group(2), 0)
        return Operand("imm", value=-v if m.group(1) else v)
    return None


class _Scopes:
    def __init__(self):
        self.stack = [{}]
        self.labels = [{}]        # per block: label -> its name in Kernel.labels
        self.pending = [[]]       # per block: branch operands whose label is not resolved yet
        self.n = 0

    def push(self):
        self.stack.append({})
        self.labels.append({})
        self.pending.append([])

    def pop(self):
        if len(self.stack) > 1:
            self.stack.pop()
            labels, pending = self.labels.pop(), self.pending.pop()
            for o in pending:     # a target this block declares is this block's; else look further out
                if o.name in labels:
                    o.name = labels[o.name]
                else:
                    self.pending[-1].append(o)

    def label(self, name):
        """Declare a label in the current block; its name in Kernel.labels (renamed inside a nested block)."""
        return self._rename(self.labels, name)

    def refer(self, o):
        """A branch to label operand o, resolved when its block closes (labels may be used before they appear)."""
        self.pending[-1].append(o)

    def declare(self, name):
        """Declare a register in the current block; its name in Kernel.regs (renamed inside a nested block)."""
        return self._rename(self.stack, name)

    def _rename(self, tables, name):
        if len(self.stack) == 1:
            return name
        self.n += 1
        new = f"{name}@{self.n}"
        tables[-1][name] = new
        return new

    def resolve(self, name):
        for sc in reversed(self.stack):
            if name in sc:
                return sc[name]
        return name


def _operand(tok: str, scopes: _Scopes) -> Operand:
    t = tok.strip()
    if t == "_":
        return Operand("sink")
    if t.startswith("{") and t.endswith("}"):
        return Operand("vec", items=[_operand(x, scopes) for x in _split_args(t[1:-1])])
    if t.startswith("(") and t.endswith(")"):      # a call's argument or return list
        return Operand("vec", items=[_operand(x, scopes) for x in _split_args(t[1:-1])], name="()")
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1].strip()
        parts = _split_args(inner)
        if len(parts) > 1:                     # [tmap, {c0, c1}]
            base = _operand(parts[0], scopes)
            coords = _operand(parts[1], scopes)
            return Operand("addr", name=base.name, items=coords.items, value=0)
        m = re.fullmatch(r"([%\w$.@]+)?\s*(?:\+\s*(-?\s*[\w]+))?", inner.replace("+-", "+-"))
        if m and m.group(1) and _imm(m.group(1)) is None:
            name = scopes.resolve(m.group(1))
            off = int(m.group(2).replace(" ", ""), 0) if m.group(2) else 0
            return Operand("addr", name=name, value=off)
        im = _imm(inner)
        if im is not None:
            return Operand("addr", name="", value=im.value)
        raise ValueError(f"address operand {t!r}")
    if "|" in t:                               # d|p (setp, elect.sync, shfl.sync)
        return Operand("vec", items=[_operand(x, scopes) for x in t.split("|")], name="|")
    neg = t.startswith("!")
    if neg:
        t = t[1:]
    im = _imm(t)
    if im is not None:
        return im
    if t.startswith("%"):
        return Operand("reg", name=scopes.resolve(t), neg=neg)
    if re.fullmatch(r"[\w$.]+", t):
        r = scopes.resolve(t)
        if r != t:
            return Operand("reg", name=r, neg=neg)
        return Operand("sym", name=t, neg=neg)
    raise ValueError(f"operand {t!r}")


def _split_op(op: str) -> list[str]:
    return op.split(".")


def _parse_var(text: str) -> Var | None:
    m = _VARDECL.match(text.strip().removeprefix(".extern ").removeprefix(".visible ").strip())
    if not m:
        return None
    space, mods, name, count, init = m.groups()
    extern = ".extern" in text
    al = _ALIGN.search(mods)
    ty = _TYPE.search(mods)
    esize = TYPE_BYTES[ty.group(1)] if ty else 1
    n = int(count) if count else (0 if count == "" else 1)
    data = None
    if init is not None:
        vals = [int(v.strip(), 0) for v in init.strip().strip("{}").split(",") if v.strip()]
        data = b"".join(v.to_bytes(esize, "little", signed=v < 0) for v in vals)
    return Var(space, name, n * esize, int(al.group(1)) if al else esize, data, extern)


def demangle(name: str) -> str:
    """The qualified name of an Itanium-mangled C++ function (`_ZN3tma4waitEPyj` -> `tma::wait`), its
    parameter types left out; template arguments are shown as <...>; any other name as it is."""
    if not name.startswith("_Z"):
        return name
    i = 2 + (name[2:3] == "L")
    nested = name[i:i + 1] == "N"
    i += nested
    while name[i:i + 1] in ("K", "V", "r"):
        i += 1
    parts = []
    while i < len(name) and name[i].isdigit():
        j = i
        while name[j].isdigit():
            j += 1
        n = int(name[i:j])
        parts.append(name[j:j + n])
        i = j + n
        if name[i:i + 1] == "I":
            parts[-1] += "<...>"
            break
        if not nested:
            break
    parts = [p for p in parts if not p.startswith(("_INTERNAL_", "_GLOBAL__N"))]   # anonymous namespaces
    return "::".join(parts) if parts and all(parts) else name


def parse(text: str) -> Module:
    """Read PTX text into a Module (the model's one PTX reader)."""
    files = {int(a): b for a, b in _FILE.findall(text)}
    lines = text.splitlines()
    kernels, mvars = {}, []
    i = 0
    cur_loc: tuple = ()
    cur_funcs: tuple = ()
    parents: dict = {}           # (file, line, column) -> the (file, line, column) it was inlined at
    func_of: dict = {}           # (file, line, column) -> the function that line lies in
    names = {lab: demangle(bytes(int(b) for b in re.findall(r"\d+", body.replace(".b8", ""))).split(b"\0")[0].decode(errors="replace"))
             for lab, body in _INFO_STRING.findall(text)}
    while i < len(lines):
        raw = _COMMENT.sub("", lines[i]).strip()
        if ".entry" in raw:
            name = re.search(r"\.entry\s+([\w$]+)", raw).group(1)
            # parameters up to ')'
            header = raw
            while ")" not in header or "(" not in header:
                i += 1
                header += " " + _COMMENT.sub("", lines[i]).strip()
            plist = header[header.index("(") + 1: header.rindex(")")]
            params = []
            for p in [x.strip() for x in plist.split(",") if x.strip()]:
                pm = re.match(r"\.param\s+(.*?)([\w$]+)\s*(?:\[(\d+)\])?$", p)
                ty = _TYPE.search(pm.group(1))
                al = _ALIGN.search(pm.group(1))
                es = TYPE_BYTES[ty.group(1)] if ty else 1
                size = es * (int(pm.group(3)) if pm.group(3) else 1)
                params.append((pm.group(2), size, int(al.group(1)) if al else es))
            # body: from the first '{' to its match
            i += 1
            directives = ""
            while "{" not in _COMMENT.sub("", lines[i]):
                directives += " " + _COMMENT.sub("", lines[i])
                i += 1
            body_start = i
            k = Kernel(name, params, [], {}, {}, [], [])
            cm = re.search(r"\.reqnctapercluster\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", directives)
            if cm:
                k.cluster_dims = tuple(int(x) if x else 1 for x in cm.groups())
            scopes = _Scopes()
            depth = 0
            buf = ""
            j = body_start
            first = True
            vdepth = 0
            while j < len(lines):
                line = _COMMENT.sub("", lines[j])
                s = line.strip()
                if s.startswith(".loc") and not s.startswith(".local"):
                    m = _LOC.match(s)
                    here = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
                    if m.group(4):
                        func_of[here] = names.get(m.group(4), m.group(4))
                    chain = [here]
                    if m.group(5):
                        parents[here] = (int(m.group(5)), int(m.group(6)), int(m.group(7)))
                        p = parents[here]
                        while p is not None and len(chain) < 32:
                            chain.append(p)
                            p = parents.get(p)
                    cur_loc = tuple(c[:2] for c in chain)
                    cur_funcs = tuple(func_of.get(c, "") for c in chain)
                    j += 1
                    continue
                if s.startswith(".file") or s.startswith(".pragma") or not s:
                    j += 1
                    continue
                pos = 0
                done = False
                for ch_i, ch in enumerate(line):
                    if ch == "{" and (buf + line[pos:ch_i]).strip():
                        vdepth += 1                      # a vector operand, not a scope
                        continue
                    if ch == "}" and vdepth:
                        vdepth -= 1
                        continue
                    if ch in "{};":
                        stmt = (buf + line[pos:ch_i]).strip()
                        buf = ""
                        pos = ch_i + 1
                        if stmt:
                            _stmt(k, stmt, scopes, j + 1, cur_loc, cur_funcs)
                        if ch == "{":
                            depth += 1
                            if not first:
                                scopes.push()
                            first = False
                        elif ch == "}":
                            depth -= 1
                            if depth == 0:
                                done = True
                                break
                            scopes.pop()
                if done:
                    break
                rest = line[pos:].strip()
                lab = re.fullmatch(r"([\w$]+):\s*(.*)", rest)
                if lab:
                    k.labels[scopes.label(lab.group(1))] = len(k.code)
                    rest = lab.group(2)
                buf += " " + rest if rest else ""
                j += 1
            kernels[name] = k
            i = j + 1
            continue
        if raw.startswith((".global", ".shared", ".const", ".extern", ".visible .global", ".visible .shared")):
            stmt = raw
            while not stmt.rstrip().endswith(";") and i + 1 < len(lines):
                i += 1
                stmt += " " + _COMMENT.sub("", lines[i]).strip()
            v = _parse_var(stmt.rstrip(";"))
            if v is not None:
                mvars.append(v)
        i += 1
    return Module(kernels, mvars, files)


def _stmt(k: Kernel, stmt: str, scopes: _Scopes, line: int, loc: tuple, funcs: tuple = ()):
    s = stmt.strip()
    lab = re.match(r"([\w$]+):\s*(.*)$", s, re.S)
    if lab and not s.startswith("."):
        k.labels[scopes.label(lab.group(1))] = len(k.code)
        s = lab.group(2).strip()
        if not s:
            return
    if s.startswith(".reg"):
        m = _REGDECL.match(s)
        ty = m.group(1)
        for d in m.group(2).split(","):
            d = d.strip()
            rm = re.fullmatch(r"([%\w$]+)<(\d+)>", d)
            if rm:
                k.regs[rm.group(1)] = ty
            else:
                k.regs[scopes.declare(d)] = ty
        return
    if s.startswith((".shared", ".local")):
        v = _parse_var(s)
        (k.shared if v.space == "shared" else k.local).append(v)
        return
    if s.startswith("."):
        return                                # .maxntid, .reqntid, .pragma, ...
    guard = None
    gm = re.match(r"@(!?)([%\w$@]+)\s+(.*)$", s, re.S)
    if gm:
        guard = Operand("reg", name=scopes.resolve(gm.group(2)), neg=bool(gm.group(1)))
        s = gm.group(3)
    parts = s.split(None, 1)
    op = parts[0]
    args = [_operand(a, scopes) for a in _split_args(parts[1])] if len(parts) > 1 else []
    # a branch target is a label, not a symbol
    if op.startswith(("bra", "call")):
        args = [Operand("label", name=a.name) if a.kind == "sym" else a for a in args]
        for a in args:
            if a.kind == "label":
                scopes.refer(a)
    k.code.append(Instr(op, _split_op(op), args, guard, line, loc, " ".join(stmt.split()), funcs))


# ------------------------------------------------------------------------------ where an instruction came from
COURSE_DIRS = ("judge", "chapters", "exercises")     # the course's top folders that hold CUDA files


def _label(path: str, learner: str) -> tuple[str, bool]:
    """(how a message names this .file, whether it is a header of the CUDA toolkit)."""
    pp = PurePosixPath(path.replace("\\", "/"))
    if pp.name == learner:
        return learner, False
    parts = pp.parts
    course = [i for i, p in enumerate(parts[:-1]) if p in COURSE_DIRS]
    if course:
        return str(PurePosixPath(*parts[course[-1]:])), False
    if "include" in parts[:-1]:
        last = len(parts) - 1 - parts[::-1].index("include")
        return str(PurePosixPath(*parts[last + 1:])), True
    return pp.name, False


def file_label(path: str, learner: str) -> str:
    """How a message names a `.file` of the PTX: the learner's file by its own name (`learner`, the file
    the build compiled), a file of the course by its path from the course's top folder
    (`judge/include/tma.cuh`, `chapters/ch03_clusters/x.cuh`), a CUDA header by its path under include/,
    anything else by its name. (Builds name the course's headers by their path in the course in #line
    markers, and NVRTC prefixes the folder it ran in, which need not be the course's.)"""
    return _label(path, learner)[0]


def learner_lines(mod: Module, ins: Instr, learner: str) -> list[int]:
    """The lines of the learner's file in this instruction's source chain, innermost first (its own
    line, then the lines of the learner's functions that were inlined into each other)."""
    return [int(ln) for f, ln in ins.loc or () if _label(mod.files.get(f, f"file {f}"), learner)[0] == learner]


def learner_line(mod: Module, ins: Instr, learner: str) -> int | None:
    """The line of the learner's file this instruction came from (directly or through the header
    functions it called), or None when the PTX names none."""
    lines = learner_lines(mod, ins, learner)
    return lines[0] if lines else None


def source_lines(source: str, learner: str) -> dict[int, str]:
    """The learner's own lines (number -> text) in a build's inlined source (judge.gpu.build.inline_headers:
    the file's text with each header put in place between `#line N "path"` markers)."""
    out, line, mine = {}, 1, True
    for text in source.splitlines():
        hit = re.match(r'\s*#line\s+(\d+)\s+"([^"]*)"', text)
        if hit:
            line, mine = int(hit.group(1)), PurePosixPath(hit.group(2)).name == learner
            continue
        if mine:
            out[line] = text
        line += 1
    return out


def place(mod: Module, ins: Instr, learner: str) -> str:
    """The source line an instruction came from, in words, innermost first; "" when the PTX has no .loc.

    k.cu:8                                              the learner's own line
    k.cu:44 (in load_tile, inlined at line 74)          a function of the learner's file, inlined
    k.cu:4, through judge/include/tma.cuh:62 (in tma::mbar_init)
    k.cu:7, through judge/include/tma.cuh:96 (in tma::try_wait, called from line 106 in tma::wait)
    k.cu:40 (in produce, inlined at line 74), through judge/include/tma.cuh:84 (in tma::arrive)
    judge/include/tma.cuh:62 (in tma::mbar_init; inside the header: the PTX names no line that called it)

    The learner's line comes first, where the PTX names one: it is the line to look at. A line inside a
    header is the header's (its path and line), never the learner file's; the learner's line that called
    into it comes from the `.loc ... inlined_at` chain when the PTX gives one."""
    if not ins.loc:
        return ""
    funcs = tuple(ins.funcs) + ("",) * (len(ins.loc) - len(ins.funcs))
    frames = [(f, ln, fn) for (f, ln), fn in zip(ins.loc, funcs)]
    named = {f: _label(mod.files.get(f, f"file {f}"), learner) for f, _, _ in frames}
    labels = {f: lab for f, (lab, _) in named.items()}
    # inside the CUDA toolkit's own headers only the function the course's code called is named
    tk = {f: toolkit for f, (_, toolkit) in named.items()}
    frames = [fr for i, fr in enumerate(frames) if not tk[fr[0]] or i + 1 == len(frames) or not tk[frames[i + 1][0]]]
    mine = next((i for i, (f, _, _) in enumerate(frames) if labels[f] == learner), None)

    def inlined(fn, outer):             # " (in f, inlined at line 71, line 80)" for frames further out
        at = ", ".join(f"line {ln}" if labels[f] == learner else f"{labels[f]}:{ln}" for f, ln, _ in outer)
        return f" ({'in ' + fn + ', ' if fn else ''}inlined at {at})" if outer else ""

    f0, l0, fn0 = frames[0]
    text = f"{labels[f0]}:{l0}"
    if mine == 0:
        return text + inlined(fn0, frames[1:])
    detail = [f"in {fn0}"] if fn0 else []
    prev = f0
    for f, ln, fn in frames[1:mine]:
        detail.append(f"called from {'line ' + str(ln) if f == prev else labels[f] + ':' + str(ln)}"
                      + (f" in {fn}" if fn else ""))
        prev = f
    if mine is None:
        if not labels[f0].endswith(".cu"):
            detail.append("inside the header: the PTX names no line that called it")
        return text + (f" ({', '.join(detail[:-1])}; {detail[-1]})" if len(detail) > 1
                       else f" ({detail[0]})" if detail else "")
    _, lm, fnm = frames[mine]
    return f"{learner}:{lm}" + inlined(fnm, frames[mine + 1:]) + f", through {text}" \
        + (f" ({', '.join(detail)})" if detail else "")
