"""tests/model/test_model_inventory.py - every PTX instruction of every course kernel, fixture and solution is one
the CPU model runs (or a named, expected gap).

Run: PYTHONPATH=$PWD .venv/bin/python -m pytest tests/model/test_model_inventory.py -q   (compiles ~100 files
through NVRTC the first time; the build cache makes later runs fast)

Each .cu under chapters/ and exercises/ (starters aside: they are generated and unfinished), and each
fixture stored as a patch against its solution (NAME.cu.patch, made into NAME.cu by
judge.grading.fixtures.resolve), is compiled for the target its `// judge: target=` line declares (a
fixture without the line takes its exercise's solution's), with the line's defines. Its PTX is read with the model's own reader
(judge.model.ptx), and each instruction is given to the factory that judge.model.registry finds
for it: no factory, or a factory that raises Unsupported for that form, is a gap. A SKIP for an
instruction the model lacks is not a verdict: the gap is to be closed.
"""
from __future__ import annotations

import functools
import tomllib
from pathlib import Path

import pytest

from judge.gpu import build
from judge.grading import fixtures
from judge.grading.patches import PATCH_SUFFIX
from judge.model import errors, ptx, registry
from judge.model import state as model_state

ROOT = Path(__file__).resolve().parents[2]

# Instruction families the model does not run yet, each with the reason. Keep this the one place.
EXPECTED_GAPS: dict[str, str] = {}      # none today: every instruction of every course kernel runs


def _compile_error_fixtures() -> set[Path]:
    """Fixtures an exercise declares to be COMPILE ERROR: they have no PTX."""
    out = set()
    for toml in (ROOT / "exercises").glob("*/exercise.toml"):
        fixtures = tomllib.loads(toml.read_text()).get("fixtures", {})
        out |= {toml.parent / "fixtures" / name for name, spec in fixtures.items()
                if isinstance(spec, dict) and spec.get("verdict") == "COMPILE ERROR"}
    return out


def _kernel_files() -> list[Path]:
    """Every kernel file by the path the course names it by: a patched fixture as fixtures/NAME.cu."""
    files = {p for d in ("chapters", "exercises") for p in (ROOT / d).rglob("*.cu")}
    files |= {p.with_name(p.name.removesuffix(PATCH_SUFFIX))
              for d in ("chapters", "exercises") for p in (ROOT / d).rglob("*.cu" + PATCH_SUFFIX)}
    broken = _compile_error_fixtures()
    return sorted(p for p in files if p.name != "starter.cu" and p not in broken)


def _source(path: Path) -> Path:
    """The file that holds the kernel: the path itself, or the solution with the fixture's patch applied."""
    return Path(fixtures.resolve(path))


def _judge_line(path: Path) -> dict:
    try:
        return build.judge_line(_source(path))
    except ValueError:
        sol = path.parent.parent / "solution.cu" if path.parent.name == "fixtures" else None
        if sol is not None and sol.exists():
            return build.judge_line(sol)
        raise


@functools.lru_cache(maxsize=None)
def _instructions(path: Path) -> dict[str, str]:
    """{PTX instruction text form: first PTX line using it} -> per distinct dotted name."""
    spec = _judge_line(path)
    b = build.compile(_source(path), target=spec["target"], defines=spec["defines"])
    mod = ptx.parse(b.ptx)
    out = {}
    for k in mod.kernels.values():
        for ins in k.code:
            out.setdefault(ins.op, (k, mod, ins))
    return out


def _gap(kernel, mod, ins) -> str | None:
    """Why the model cannot run this instruction, or None when it can."""
    factory = registry.lookup(ins.parts)
    if factory is None:
        return "no family registers it"
    probe = model_state.Machine.__new__(model_state.Machine)      # what a factory reads at build time
    probe.mod, probe.k, probe.regs = mod, kernel, {}
    try:
        factory(probe, ins)
    except errors.Unsupported as e:
        return str(e)
    return None


def _excused(op: str) -> str | None:
    return next((why for fam, why in EXPECTED_GAPS.items() if op == fam or op.startswith(fam + ".")), None)


FILES = _kernel_files()


def test_the_course_has_kernels_to_inventory():
    assert len(FILES) > 50
    assert any("tcgen05" in _source(p).read_text() for p in FILES)


def test_fixtures_stored_as_patches_are_inventoried_as_the_files_they_make():
    patched = [p for p in FILES if not p.exists()]
    assert patched, "no fixture is stored as a patch: the inventory of patched fixtures tests nothing"
    for p in patched:
        assert (p.parent / (p.name + PATCH_SUFFIX)).exists(), p
        made = _source(p)
        assert made != p and made.name == p.name and made.exists(), f"{p}: resolved to {made}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_instruction_of_the_kernel_is_one_the_model_runs(path):
    gaps = {}
    for op, (k, mod, ins) in sorted(_instructions(path).items()):
        if _excused(op):
            continue
        why = _gap(k, mod, ins)
        if why:
            gaps[op] = f"{why} (PTX line {ins.line}: {ins.text})"
    assert not gaps, (f"{path.relative_to(ROOT)}: the CPU model lacks "
                      + "; ".join(f"{op}: {why}" for op, why in gaps.items()))


def test_each_expected_gap_is_still_a_gap():
    for fam, why in EXPECTED_GAPS.items():
        seen = [(op, v) for p in FILES for op, v in _instructions(p).items() if op.startswith(fam + ".")]
        assert seen, f"no course kernel uses {fam}.*: remove it from EXPECTED_GAPS"
        assert any(_gap(*v) for _, v in seen), (
            f"every {fam}.* instruction of the course now runs on the model: remove {fam!r} from EXPECTED_GAPS")
