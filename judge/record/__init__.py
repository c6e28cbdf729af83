"""The Hopper record: what ran on the H200 (reading, provenance), and writing it in the record run.

    from judge import record
    record.figures("ch01.sgemm")    # judge.record.reading: figures, load, device_line, stale, regrade
    record.save("ch01.sgemm", {...}, notebook=...)   # judge.record.write: only with JUDGE_RECORD=1
    python -m judge.record.hopper_run                # the H200 run that writes record/hopper.json

Neither module imports this package: reading <- write <- hopper_run, one way.
"""
from judge.record.reading import (  # noqa: F401 - re-exported
    GRADED_BY, RECORD, device_line, figures, kind_of, load, read, regrade, regrade_note, source_hash, stale)
from judge.record.write import (  # noqa: F401 - re-exported
    README_BEGIN, README_END, figures_table, main, save, unrecorded, update_readme)
