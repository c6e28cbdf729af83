"""Grader of swizzle_address: python practice/judge.py check swizzle_address

Every byte of 24 rows (three 128B atoms, six 64B ones, twelve 32B ones) is compared with
the table solution.py's formulas give. When the Hopper record holds the table the chapter
notebook measured on the H200 (record.figures("ch02.swizzle")["table_128B"]: for rows 0..7,
table[row][chunk] = the physical 16-byte chunk TMA wrote logical chunk `chunk` to), the
128B mode is graded against that measured table instead, and the result says which was used.
"""

from judge import record
from judge.grading.grade import Result, Verdict, learner_error

ROWS = 24
MODES = (("swizzle128", 128), ("swizzle64", 64), ("swizzle32", 32))



def _recorded_128():
    """The 8x8 chunk table measured on the H200, or None while the record has none."""
    figs = record.figures("ch02.swizzle")
    table = figs.get("table_128B") if isinstance(figs, dict) else None
    if not (isinstance(table, list) and len(table) == 8 and all(len(r) == 8 for r in table)):
        return None, ""
    sec = record.load("ch02.swizzle")
    return [[int(c) for c in r] for r in table], f"{sec.get('device', '?')} ({sec.get('date', '?')})"


def check(sub) -> Result:
    sub.progress("importing swizzle.py")
    mod = sub.learner_module()
    ref = sub.exercise.reference()
    measured, where = _recorded_128()
    source = (f"128B graded against the table measured on {where}" if measured else
              "graded against the reference formula's table (no table from the H200 in the record yet)")

    def expected(name, span, row, col):
        if measured is not None and name == "swizzle128" and row < 8:
            chunk, byte = divmod(col, 16)
            return row * 128 + measured[row][chunk] * 16 + byte
        return getattr(ref, name)(row, col)

    for name, span in MODES:
        sub.progress(f"{name}: {ROWS} rows x {span} bytes")
        fn = getattr(mod, name, None)
        if fn is None:
            return Result(Verdict.WRONG, f"swizzle.py defines no function {name}(row, col_bytes)",
                          checked=[source])
        for row in range(ROWS):
            for col in range(span):
                try:
                    got = fn(row, col)
                except Exception as e:  # noqa: BLE001
                    return Result(Verdict.WRONG, learner_error(e, f"{name}({row}, {col})"), checked=[source])
                want = expected(name, span, row, col)
                if got != want:
                    details = [f"row {row} starts at byte {row * span}; logical chunk {col // 16} of it "
                               f"belongs in physical chunk {(want - row * span) // 16}"]
                    if isinstance(got, int) and row * span <= got < (row + 1) * span:
                        details.append(f"you put it in physical chunk {(got - row * span) // 16}")
                    elif isinstance(got, int):
                        details.append("your offset is outside the row: the swizzle never moves a chunk "
                                       "to another row")
                    return Result(Verdict.WRONG, f"{name}(row={row}, col_bytes={col}): got {got!r} "
                                  f"expected {want}", details=details, checked=[source])
    return Result(Verdict.PASS, f"all three modes right on {ROWS} rows; {source}",
                  checked=[f"{ROWS} rows x 128/64/32 bytes", source])
