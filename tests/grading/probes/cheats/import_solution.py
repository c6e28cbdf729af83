"""A cheat for pipeline_timeline: it imports the reference solution instead of writing its own.

ROOT is filled in by tests/grading/test_sandbox.py with the course checkout. Every way in is tried: the
judge's own loader, the file by path, the package on sys.path. The judge must refuse each one.
"""
import importlib.util
import sys

ROOT = "@ROOT@"
tried = []
ref = None
for attempt in ("judge", "path", "syspath"):
    try:
        if attempt == "judge":
            from judge.grading import exercise
            ref = exercise.get("pipeline_timeline").reference()
        elif attempt == "path":
            spec = importlib.util.spec_from_file_location("ref", ROOT + "/exercises/pipeline_timeline/solution.py")
            ref = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(ref)
        else:
            sys.path.insert(0, ROOT + "/exercises/pipeline_timeline")
            import solution as ref  # noqa: F401
        break
    except Exception as e:  # noqa: BLE001
        tried.append(f"{attempt}: {type(e).__name__}: {e}")
        ref = None
if ref is None:
    raise ImportError("no way to the solution; " + " | ".join(tried))
schedule, pipeline_time = ref.schedule, ref.pipeline_time
