"""Grader of swizzle_address: python practice/judge.py check swizzle_address

The three functions of the statement, each called directly (judge.grading.cpu_flow): first the
statement's examples and the rows where a mistake shows (row 0, rows 7-9 around the 8-row atom,
the last byte of a row), then rows and byte offsets drawn at random (rows up to 4095, well past
the repeat). The reference is the course's own rule, judge.hw.tma.swizzle_offset, on the byte
address row * span + col_bytes. When the Hopper record holds the table the chapter notebook measured on
the H200 (record.figures("ch02.swizzle")["table_128B"]: for rows 0..7, table[row][chunk] = the
physical 16-byte chunk TMA wrote logical chunk `chunk` to), rows 0..7 of the 128B mode are graded
against that measured table instead, and the result says which was used.
"""
from hypothesis import strategies as st

from judge import record
from judge.hw import tma
from judge.grading import checks
from judge.grading import cpu_flow as flow

SPANS = {"swizzle128": 128, "swizzle64": 64, "swizzle32": 32}


def _recorded_128():
    """The 8x8 chunk table measured on the H200, or None while the record has none."""
    figs = record.figures("ch02.swizzle")
    table = figs.get("table_128B") if isinstance(figs, dict) else None
    if not (isinstance(table, list) and len(table) == 8 and all(len(r) == 8 for r in table)):
        return None, ""
    sec = record.load("ch02.swizzle")
    return [[int(c) for c in r] for r in table], f"{sec.get('device', '?')} ({sec.get('date', '?')})"


def _address_rule(span):
    """The reference: judge.hw.tma.swizzle_offset (the course's own rule) on a tile of span-byte rows."""
    def swizzled(row, col_bytes):
        return int(tma.swizzle_offset(row * span + col_bytes, f"{span}B"))
    return swizzled


def _reference(name, measured):
    rule = _address_rule(SPANS[name])
    if measured is None or name != "swizzle128":
        return rule

    def swizzle128(row, col_bytes):
        if row < 8:
            chunk, byte = divmod(col_bytes, 16)
            return row * 128 + measured[row][chunk] * 16 + byte
        return rule(row, col_bytes)
    return swizzle128


def _explain(span):
    lines_per_row = {128: "each row is its own 128-byte line (XOR with row % 8)",
                     64: "two 64-byte rows share a 128-byte line (XOR with row // 2 % 4)",
                     32: "four 32-byte rows share a 128-byte line (XOR with row // 4 % 2)"}[span]

    def explain(call, got, want):
        row, col = call.args
        lines = [f"row {row} starts at byte {row * span}; logical chunk {col // 16} of it belongs in "
                 f"physical chunk {(want - row * span) // 16}: {lines_per_row}"]
        if checks.as_integer(got) is not None:
            g = int(got)
            if row * span <= g < (row + 1) * span:
                lines.append(f"you put it in physical chunk {(g - row * span) // 16}"
                             + ("; only the 16-byte chunk moves, the byte within it stays"
                                if (g - col) % 16 else ""))
            else:
                lines.append("your offset is outside the row: the swizzle never moves a chunk to another row")
        return lines
    return explain


def _edges(span):
    cases = [((0, 20), "row 0 is not moved"), ((0, span - 1), "the last byte of row 0")]
    if span == 128:
        cases += [((3, 20), "the statement's example 3*128 + (1^3)*16 + 4 == 420"),
                  ((9, 0), "the statement's example row 9 behaves as row 1 of the next atom")]
    cases += [((r, c), f"row {r}, around the end of the pattern's repeat")
              for r in (1, 2, 3, 5, 7, 8, 9, 15) for c in (0, 17, span - 1)]
    return [flow.Edge(a, why) for a, why in cases]


def check(sub):
    measured, where = _recorded_128()
    source = (f"128B rows 0-7 graded against the table measured on {where}" if measured else
              "graded against the reference formula (judge.hw.tma.swizzle_offset; no table from the H200 in the record yet)")
    functions = [flow.Function(name, reference=_reference(name, measured),
                               args=st.tuples(st.integers(0, 4095), st.integers(0, span - 1)),
                               edges=_edges(span), explain=_explain(span))
                 for name, span in SPANS.items()]
    return flow.run(sub, functions, note=source, checked=[source])
