"""Display helpers for the notebooks: source with highlighting, SASS excerpts, tables.

    from judge import show
    show.source("chapters/ch01_cp_async/sgemm_cp_async.cu", lines=(10, 40))
    show.sass(b, "sgemm_cp_async", features=["cp.async", "cp.async.wait"])
    show.table([{"kernel": "sync", "TFLOPS": 35.7}, ...])

Each works in a plain terminal too (prints text).
"""
from __future__ import annotations

from pathlib import Path

from judge import config
from judge.hw import sass as _sass


def _ipython():
    try:
        from IPython import get_ipython
        from IPython.display import HTML, Markdown, display
        if get_ipython() is None:
            return None
        return HTML, Markdown, display
    except ImportError:
        return None


def source(path, lines: tuple[int, int] | None = None, language: str = "cuda") -> None:
    """Show a source file (or a line range of it) with syntax highlighting."""
    p = Path(path)
    if not p.is_absolute():
        p = config.ROOT / p
    text = p.read_text().splitlines()
    if lines:
        text = text[lines[0] - 1:lines[1]]
    body = "\n".join(text)
    ip = _ipython()
    if ip:
        _, Markdown, display = ip
        display(Markdown(f"`{Path(path)}`" + (f" lines {lines[0]}-{lines[1]}" if lines else "")
                         + f"\n```{'cpp' if language == 'cuda' else language}\n{body}\n```"))
    else:
        print(f"--- {path}\n{body}")


def sass(build, kernel: str, features: list[str] | None = None, context: int = 0, limit: int = 12) -> None:
    """Print the SASS lines of `kernel` that prove each feature (all of them if none named)."""
    k = build.sass_of(kernel)
    feats = features or list(_sass.feature_counts(k))
    out = [f"SASS of {kernel} ({build.target}):"]
    for f in feats:
        n = _sass.FEATURES[f].count(k)
        out.append(f"  {f}: {n} instruction(s) - {_sass.FEATURES[f].describe}")
        for line in _sass.lines_with(k, f, limit=min(limit, 3)):
            out.append(f"      {line}")
    print("\n".join(out))


def table(rows: list[dict], floatfmt: str = "{:.3g}") -> None:
    """Show a list of dicts as a table (HTML in a notebook, aligned text elsewhere)."""
    if not rows:
        print("(no rows)")
        return
    cols = list(dict.fromkeys(k for r in rows for k in r))

    def fmt(v):
        if isinstance(v, float):
            return floatfmt.format(v)
        return "" if v is None else str(v)

    ip = _ipython()
    if ip:
        HTML, _, display = ip
        head = "".join(f"<th>{c}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{fmt(r.get(c))}</td>" for c in cols) + "</tr>" for r in rows)
        display(HTML(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"))
        return
    cells = [[fmt(r.get(c)) for c in cols] for r in rows]
    w = [max(len(c), *(len(x[i]) for x in cells)) for i, c in enumerate(cols)]
    print("  ".join(c.ljust(w[i]) for i, c in enumerate(cols)))
    for x in cells:
        print("  ".join(v.ljust(w[i]) for i, v in enumerate(x)))


def recorded_note(section: str) -> str:
    """'recorded on NVIDIA H200 ... on <date>' for a record section, for captions."""
    from judge import record as record
    s = record.load(section)
    if not s:
        return f"(nothing recorded yet for {section}: run python -m judge.record.hopper_run on an H200)"
    return f"measured on {s['device']} (driver CUDA {s['driver']}), {s['date']}"
