"""judge.model.snippet - a few lines of PTX made into a whole module the model can run (for tests).

    from judge.model import snippet
    ptx = snippet.kernel('''
        ld.param.u64 %rd1, [out];
        mov.u32 %r1, %tid.x;
        ...
    ''', params=[("out", "u64")])
    judge.model.run(ptx, "k", block=(32, 1, 1), args=(out_array,))

Registers %p (pred), %h (b16), %r (b32), %rd (b64), %f (f32) and %fd (f64) are declared, 128 of
each (and %q0..7, .b128); `shared` adds declarations inside the kernel (e.g. ".shared .align 16 .b8 buf[1024];").
Tests: tests/test_model_ops_*.py feed each instruction family through it.
"""
from __future__ import annotations

_REGS = """    .reg .pred %p<128>;
    .reg .b16 %h<128>;
    .reg .b32 %r<128>;
    .reg .b64 %rd<128>;
    .reg .f32 %f<128>;
    .reg .f64 %fd<128>;
    .reg .b128 %q<8>;
"""


def kernel(body: str, *, params=(("out", "u64"),), name: str = "k", shared: str = "",
           cluster: tuple | None = None, target: str = "sm_90a") -> str:
    """The PTX text of a module holding one kernel `name` with these (name, type) parameters and body."""
    plist = ",\n".join(f"    .param .{ty} {pn}" for pn, ty in params)
    directives = f".reqnctapercluster {', '.join(str(c) for c in cluster)}\n" if cluster else ""
    return (f".version 8.5\n.target {target}\n.address_size 64\n\n"
            f".visible .entry {name}(\n{plist}\n)\n{directives}{{\n{_REGS}{shared}\n{body}\n    ret;\n}}\n")


def run(body: str, args, *, params=(("out", "u64"),), shared: str = "", block=(32, 1, 1), grid=(1, 1, 1),
        cluster=(1, 1, 1), **kw):
    """kernel(body, ...) run on the model (judge.model.run) as kernel "k"; returns its Report."""
    from judge import model
    ptx = kernel(body, params=params, shared=shared)
    return model.run(ptx, "k", grid=grid, block=block, cluster=cluster, args=tuple(args), **kw)
