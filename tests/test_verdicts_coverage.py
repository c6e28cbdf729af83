"""Every PTX instruction of every Hopper course kernel, solution and fixture is one the CPU model runs.

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/test_verdicts_coverage.py -q -p no:cacheprovider

A SKIP for an instruction the model lacks is a gap, not a verdict (issue 17): this test compiles each
sm_90a kernel file (chapters, exercise solutions, the GPU exercises' fixtures), reads its PTX with the
model's own reader, and asks the model's registry for every instruction, then calls the family's
factory, which refuses a form it does not know (e.g. a cvt between types it cannot convert) with
Unsupported. sm_100a files (tcgen05, tensor memory) are left out here: that family is a model of its
own (issue 17, class 1), checked by its own tests.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from judge import model
from judge.gpu import build
from judge.grading import exercise
from judge.model import registry

ROOT = Path(__file__).resolve().parents[1]


def _files():
    out = []
    for p in build.course_kernels():
        spec = build.judge_line(p)
        if spec["target"].startswith("sm_90"):
            out.append((p, spec["target"], spec["defines"]))
    for ex in exercise.all_exercises():
        if ex.meta.get("target", "").startswith("sm_90") and ex.ext == ".cu":
            for name, verdict in ex.fixtures.items():
                if verdict != "COMPILE ERROR":
                    out.append((ex.fixture_path(name), ex.target, {}))
    return out


FILES = _files()

# Gaps the model has today, each a kernel the chapters run (a SKIP on a machine without a GPU, not a
# verdict): strict, so that closing one fails here until it is struck off the list.
KNOWN_GAPS = {
    "chapters/02_tma/tensormap_replace.cu": "tensormap.replace and tensormap.cp_fenceproxy (a tensor map "
                                            "edited on the device) are not modelled",
}


def _param(f):
    rel = str(f[0].relative_to(ROOT))
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[rel])] if rel in KNOWN_GAPS else []
    return pytest.param(*f, id=rel, marks=marks)


def _stub(kernel):
    return SimpleNamespace(k=kernel, sym={}, sym_space={}, counts={}, n=1)


@pytest.mark.parametrize("path,target,defines", [_param(f) for f in FILES])
def test_the_model_knows_every_instruction(path, target, defines):
    b = build.compile(path, target=target, defines=defines or None)
    mod = model.parse(b)
    missing = []
    for name, k in mod.kernels.items():
        for ins in k.code:
            factory = registry.lookup(ins.parts)
            if factory is None:
                missing.append(f"{name}: PTX line {ins.line}: {ins.op} (not registered)")
                continue
            try:
                factory(_stub(k), ins)
            except model.Unsupported as e:
                missing.append(f"{name}: PTX line {ins.line}: {ins.op} ({str(e)[:160]})")
            except Exception:  # noqa: BLE001 - the factory needs a real machine: it knows the form
                pass
    assert not missing, f"{path.name}: the model lacks " + "; ".join(sorted(set(missing))[:6])


def test_the_list_covers_the_gpu_exercises_and_their_fixtures():
    names = {str(p.relative_to(ROOT)) for p, _, _ in FILES}
    for eid in ("cp_async_sgemm", "tma_tiles", "dsmem_histogram", "ws_gemm"):
        assert f"exercises/{eid}/solution.cu" in names
        assert any(n.startswith(f"exercises/{eid}/fixtures/") for n in names)
    assert "exercises/cp_async_sgemm/fixtures/wrong_tf32_cvt.cu" in names
    assert "exercises/cp_async_sgemm/fixtures/wrong_device_assert.cu" in names
