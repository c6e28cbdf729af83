"""The child side of judge.isolate: python -m judge.worker '<json request>'.

Imports exercises/<id>/check.py, calls check(sub) and writes the Result as JSON.
A CUDA error (illegal address, launch failure, trap) becomes CRASH with the error's text.
Not meant to be run by hand; judge.grade.check() starts it.
"""
from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path


def _is_cuda_error(e: BaseException) -> bool:
    return any("CUDA" in t.__name__ or "Cuda" in t.__name__ for t in type(e).__mro__)


def main(argv: list[str]) -> int:
    req = json.loads(argv[1])
    print("@@progress loading the check", flush=True)
    from judge import exercise
    from judge.grade import Result, Stop, Submission, Verdict
    try:
        if "call" in req:          # judge.isolate.run_function: any function, isolated the same way
            call = req["call"]
            mod = exercise.import_file(call["file"], "isolated_call")
            result = getattr(mod, call["function"])(**call.get("kwargs", {}))
            if not isinstance(result, Result):
                result = Result(Verdict.PASS, "returned", measurements={"value": result})
        else:
            ex = exercise.get(req["exercise"])
            sub = Submission(ex, Path(req["file"]), Path(req["figures"]))
            result = exercise.import_file(ex.folder / "check.py", f"check_{ex.id}").check(sub)
    except Stop as s:
        result = s.result
    except Exception as e:  # noqa: BLE001
        if _is_cuda_error(e):
            result = Result(Verdict.CRASH, f"CUDA error: {e}",
                            details=["the kernel faulted; compute-sanitizer on the device names the "
                                     "first bad access"])
        else:
            tb = traceback.format_exc().strip().splitlines()
            result = Result(Verdict.CRASH, f"the check stopped with {type(e).__name__}: {e}",
                            details=tb[-6:])
    Path(req["result"]).write_text(result.to_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
