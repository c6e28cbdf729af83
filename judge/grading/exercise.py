"""Exercises: one folder each under exercises/, described by its exercise.toml, read into dataclasses.

    from judge.grading import exercise
    ex = exercise.get("cp_async_sgemm")
    ex.cases.list, ex.timing.case, ex.tiers["gold"], ex.fixture_specs["wrong_buffer.cu"].why

    exercises/<id>/
        exercise.toml    the schema below; CONTRIBUTING.md documents every key
        README.md        the statement a learner reads
        solution.<ext>   the reference solution: the single source of truth
        starter.<ext>    generated from it (python -m judge.grading.starters; a test checks they agree)
        check.py         the grader: check(sub) -> Result, or the CUDA flow's five functions
        fixtures/        the mistakes the judge must catch: NAME.patch, the solution plus one change
                         (judge.grading.fixtures), or a whole file written another way

The schema is the dataclasses below: Exercise (the top level), Cases, Timing, Tiers, Tolerance, Log
(and its LogRule) and Fixture. A key of exercise.toml is a field; a key that is no field is refused
at load, with the file, the table and the keys allowed. Adding a key is one line: a field with its
default in the dataclass of its table (and its line in CONTRIBUTING.md, which a test holds to it).

The starter is the solution with each region between BEGIN SOLUTION and END SOLUTION
comment lines replaced by that region's "starter lines": comment lines written
`#> text` (Python) or `//> text` (CUDA) become `text` in the starter.
"""
from __future__ import annotations

import difflib
import importlib.util
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path

from judge import config
from judge.grading import patches

_BEGIN = re.compile(r"^(\s*)(#|//)\s*BEGIN SOLUTION\b")
_END = re.compile(r"^\s*(#|//)\s*END SOLUTION\b")
VERDICTS = ("PASS", "WRONG", "TOO SLOW", "MISSING FEATURE", "HANG", "CRASH", "COMPILE ERROR", "SKIP")


class UnknownExercise(KeyError):
    def __init__(self, ex_id: str, suggestion: str | None):
        self.ex_id, self.suggestion = ex_id, suggestion
        hint = f"; did you mean '{suggestion}'?" if suggestion else ""
        super().__init__(f"no exercise '{ex_id}'{hint} (`python practice/judge.py list` shows them all)")

    def __str__(self):
        return self.args[0]


class SchemaError(ValueError):
    """exercise.toml does not follow the schema: names the file, the table, the key and what is allowed."""


def _not_toml(**kw):
    return field(metadata={"toml": None}, **kw)


def _table(cls):
    """metadata for a field read from a table of its own by the dataclass `cls`"""
    return {"load": lambda v, file, where: load_table(cls, v, file, where)}


# ------------------------------------------------------------------------------------------ the schema
@dataclass(frozen=True)
class Fixture:
    """[fixtures] "NAME" = { ... }: a file the judge must grade as declared."""
    verdict: str                 # what the judge gives it on an H200 (CPU exercises: everywhere)
    why: str = ""                # the mistake, in one sentence a reader understands
    cpu: str = ""                # GPU exercises: the verdict without a GPU (the CPU model), where it differs
    whole: str = ""              # a non-PASS fixture kept as a whole file, not a patch: why (written another way)
    name: str = _not_toml(default="")


_new_list = list     # Cases has a field called list


@dataclass(frozen=True)
class Cases:
    """[cases]: the correctness cases of a GPU exercise (fresh random inputs each check)."""
    list: list = field(default_factory=_new_list)   # every case on the GPU, e.g. {M = 128, N = 128, K = 8}
    model: list = field(default_factory=_new_list)  # small cases the CPU model runs (default: the first of list)
    threads: int = 0                             # threads per block a protocol replay assumes (tcgen05_gemm)


@dataclass(frozen=True)
class ModelRun:
    """[model]: how the CPU model runs a GPU exercise's cases beyond their launch."""
    max_blocks: int = 0          # above this many blocks, a random sample of whole clusters (needs check.owned)
    sms: int = 132               # %nsmid the kernel reads (the target GPU's SM count: an H200 has 132)
    ahead: bool = True           # the quickest case once more with warps running ahead of each other


# -- the domain of a GPU exercise (judge.grading.domain draws the CPU model's cases from it) --
@dataclass(frozen=True)
class DomainClass:
    """[domain] classes = [{name, when, pin, model}]: one class of cases a correct kernel must handle."""
    name: str                    # what the class is, said in the result ("every ring slot used three times")
    when: str                    # a Python expression over the case's keys and the derived names
    pin: dict = field(default_factory=dict)   # narrower families for drawing this class (as in free)
    model: bool = False          # the model's own class (a sampled grid): the H200's cases need not hold it


def _load_classes(v, file, where) -> list:
    if not isinstance(v, list):
        raise SchemaError(f"{file}: {where} should be a list of {{name, when}} tables")
    return [load_table(DomainClass, c, file, f"{where}[{i}]") for i, c in enumerate(v)]


@dataclass(frozen=True)
class Domain:
    """[domain]: what the statement leaves free and the classes of cases a correct kernel must handle."""
    free: dict = field(default_factory=dict)     # key -> family (number, list, {min, max, step})
    derive: dict = field(default_factory=dict)   # name -> expression over the keys
    fixed: dict = field(default_factory=dict)    # key -> expression: a case key computed, not drawn
    cost: str = "0"                              # what one model case costs (an expression)
    max_cost: float = 0.0                        # no drawn case costs more (0: no bound)
    order: str = ""                              # the cases run by this expression, least first ("": cost)
    classes: list = field(default_factory=list, metadata={"load": _load_classes})
    mapping: str = ""            # the statement's rule of which block writes what (check.owned); "": free


@dataclass(frozen=True)
class Timing:
    """[timing]: the timed case (its output is checked too) and the ceiling it is a fraction of."""
    case: dict                   # the size that is timed
    ceiling: str                 # copy | sgemm_fp32 | bf16_gemm | fp8_gemm | baseline (check.baseline)
    peak: str = ""               # a rate above judge.config.HOPPER_PEAK[peak] is WRONG
    max_fraction: float = 0.0    # a fraction of the ceiling above this is WRONG (0: no bound)
    reps: int = 20               # timed launches (median)


@dataclass(frozen=True)
class Tiers(Mapping):
    """[tiers]: fractions of the ceiling each tier needs. Reads as a mapping of the tiers given."""
    bronze: float | None = None
    silver: float | None = None
    gold: float | None = None

    def __getitem__(self, key):
        v = getattr(self, key, None) if key in ("bronze", "silver", "gold") else None
        if v is None:
            raise KeyError(key)
        return v

    def __iter__(self):
        return (k for k in ("bronze", "silver", "gold") if getattr(self, k) is not None)

    def __len__(self):
        return sum(1 for _ in self)


@dataclass(frozen=True)
class Tolerance:
    """[tolerance]: how close a GPU exercise's output must be (check.tolerance(case) overrides it)."""
    exact: bool = False
    rtol: float | None = None
    atol: float | None = None
    norm_tol: float | None = None


@dataclass(frozen=True)
class LogRule:
    """[log] CODE = { verdict, why }: a compiler message that decides a verdict."""
    verdict: str
    why: str


_LOG_CODE = re.compile(r"^C\d{4}$")


@dataclass(frozen=True)
class Log:
    """[log]: `forbid = ["C7508"]` (WRONG with the engine's message) or one CODE = { verdict, why } each."""
    forbid: list = field(default_factory=list)
    rules: dict = _not_toml(default_factory=dict)    # code -> LogRule


@dataclass
class Exercise:
    """The top level of exercise.toml, and where the exercise's files are."""
    id: str
    title: str
    chapter: int
    learner_file: str            # the file a learner writes (its extension says Python or CUDA)
    folder: Path = _not_toml(default=Path("."))
    order: int = 0               # place within the chapter
    difficulty: str = "medium"   # easy | medium | hard
    needs_gpu: bool = False      # a CUDA exercise graded by the CUDA flow
    target: str = config.DEFAULT_TARGET  # what the learner's CUDA is built for (sm_90a; sm_100a: no GPU, the CPU model)
    kernel: str = ""             # the kernel that is graded (GPU exercises)
    features: list = field(default_factory=list)   # SASS features it must show (judge/hw/sass.py FEATURES)
    hints: list = field(default_factory=list)      # shown one at a time by `practice/judge.py hint`
    solution_cpu: str = "PASS"   # the solution's verdict without a GPU, where the CPU model cannot give PASS
    cases: Cases = field(default_factory=Cases, metadata=_table(Cases))
    uses: dict = field(default_factory=dict)       # path -> least share of shared-memory fills through it
    carries: dict = field(default_factory=dict)    # feature -> least share of the output's bytes it produced
    model: ModelRun = field(default_factory=ModelRun, metadata=_table(ModelRun))
    domain: Domain = field(default_factory=Domain, metadata=_table(Domain))   # the model's cases, drawn
    timing: Timing | None = field(default=None, metadata=_table(Timing))
    tiers: Tiers = field(default_factory=Tiers, metadata=_table(Tiers))
    tolerance: Tolerance = field(default_factory=Tolerance, metadata=_table(Tolerance))
    log: Log = field(default_factory=Log, metadata={"load": lambda v, file, where: _load_log(v, file, where)})
    fixture_specs: dict = field(default_factory=dict, metadata={
        "toml": "fixtures", "load": lambda v, file, where: _load_fixtures(v, file, where)})

    # -------------------------------------------------------------------------- derived
    @property
    def fixtures(self) -> dict[str, str]:
        """file -> the verdict it must get (on an H200)"""
        return {n: f.verdict for n, f in self.fixture_specs.items()}

    @property
    def fixture_notes(self) -> dict[str, str]:
        """file -> why it must get that verdict"""
        return {n: f.why for n, f in self.fixture_specs.items()}

    @property
    def ext(self) -> str:
        return Path(self.learner_file).suffix

    @property
    def solution_path(self) -> Path:
        return self.folder / f"solution{self.ext}"

    @property
    def starter_path(self) -> Path:
        return self.folder / f"starter{self.ext}"

    @property
    def statement_path(self) -> Path:
        return self.folder / "README.md"

    def fixture_path(self, name: str) -> Path:
        """A file holding fixture `name`: the stored one, or the solution with its patch applied, written
        into the judge's cache (judge.grading.patches)."""
        return patches.materialize(self, name)

    def statement(self) -> str:
        return self.statement_path.read_text()

    def starter_text(self) -> str:
        """The starter generated from the solution (see module docstring)."""
        return make_starter(self.solution_path.read_text())

    def reference(self):
        """The reference solution, imported as a module (Python exercises)."""
        return import_file(self.solution_path, f"{self.id}_reference")

    def reference_module(self):
        """exercises/<id>/reference.py imported as a module: the rules the check compares against, written for
        it alone (a learners' release leaves the file out, as it leaves out the solution)."""
        name = f"{self.id}_reference_rules"
        return sys.modules.get(name) or import_file(self.folder / "reference.py", name)

    def sources(self) -> list[Path]:
        """Every file of the exercise (for the Hopper record's hashes)."""
        return sorted(p for p in self.folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


# ------------------------------------------------------------------------------------------ loading
def toml_keys(cls) -> dict[str, object]:
    """The keys a table read by `cls` may hold: toml name -> dataclass field."""
    out = {}
    for f in fields(cls):
        key = f.metadata.get("toml", f.name)
        if key is not None:
            out[key] = f
    return out


_TYPES = {"str": str, "int": int, "bool": bool, "float": (int, float), "list": list, "dict": dict}


def _check_type(value, annotation: str, file, where: str):
    names = [a.strip() for a in str(annotation).split("|")]
    allowed = tuple(t for n in names if n in _TYPES for t in (_TYPES[n] if isinstance(_TYPES[n], tuple)
                                                               else (_TYPES[n],)))
    if not allowed:
        return
    if isinstance(value, bool) and bool not in allowed:
        allowed = ()
    if not isinstance(value, allowed):
        raise SchemaError(f"{file}: {where} = {value!r} should be {' or '.join(names)}")


def load_table(cls, table, file, where: str):
    """One TOML table into the dataclass `cls`; an unknown or missing key is a SchemaError."""
    if not isinstance(table, dict):
        raise SchemaError(f"{file}: [{where}] should be a table, not {table!r}")
    keys = toml_keys(cls)
    for key in table:
        if key not in keys:
            raise SchemaError(f"{file}: [{where}] has an unknown key {key!r}; the keys allowed there: "
                              f"{', '.join(keys)} (CONTRIBUTING.md, 'exercise.toml')")
    kwargs = {}
    for key, f in keys.items():
        if key not in table:
            if f.default is MISSING and f.default_factory is MISSING:
                raise SchemaError(f"{file}: [{where}] lacks the key {key!r}")
            continue
        load = f.metadata.get("load")
        sub = f"{where}.{key}" if where != "top level" else key
        if load:
            kwargs[f.name] = load(table[key], file, sub)
        else:
            _check_type(table[key], f.type, file, sub)
            kwargs[f.name] = table[key]
    return cls(**kwargs)


def _verdict(v, file, where):
    if v not in VERDICTS:
        raise SchemaError(f"{file}: {where} = {v!r} is no verdict; one of {', '.join(VERDICTS)}")
    return v


def _load_fixtures(table, file, where) -> dict[str, Fixture]:
    if not isinstance(table, dict):
        raise SchemaError(f"{file}: [{where}] should be a table of fixture files")
    out = {}
    for name, v in table.items():
        spec = load_table(Fixture, {"verdict": v} if isinstance(v, str) else v, file, f"{where}.\"{name}\"")
        _verdict(spec.verdict, file, f"{where}.\"{name}\".verdict")
        if spec.cpu:
            _verdict(spec.cpu, file, f"{where}.\"{name}\".cpu")
        out[name] = Fixture(**{**spec.__dict__, "name": name})
    return out


def _load_log(table, file, where) -> Log:
    if not isinstance(table, dict):
        raise SchemaError(f"{file}: [{where}] should be a table")
    rules = {}
    for key, v in table.items():
        if key == "forbid":
            continue
        if not _LOG_CODE.match(key):
            raise SchemaError(f"{file}: [{where}] has an unknown key {key!r}; the keys allowed there: forbid, "
                              f"or a compiler message code such as C7508 = {{ verdict = ..., why = ... }}")
        rules[key] = load_table(LogRule, v, file, f"{where}.{key}")
        _verdict(rules[key].verdict, file, f"{where}.{key}.verdict")
    return Log(forbid=list(table.get("forbid", [])), rules=rules)


def load(folder: Path) -> Exercise:
    """The exercise in `folder`, from its exercise.toml (SchemaError when it breaks the schema)."""
    file = Path(folder) / "exercise.toml"
    try:
        meta = tomllib.loads(file.read_text())
    except tomllib.TOMLDecodeError as e:
        raise SchemaError(f"{file}: not valid TOML ({e})") from None
    ex = load_table(Exercise, meta, file, "top level")
    ex.folder = Path(folder)
    if ex.difficulty not in ("easy", "medium", "hard"):
        raise SchemaError(f"{file}: difficulty = {ex.difficulty!r}; one of easy, medium, hard")
    _verdict(ex.solution_cpu, file, "solution_cpu")
    return ex


def all_exercises() -> list[Exercise]:
    exs = [load(p.parent) for p in sorted(config.EXERCISES_DIR.glob("*/exercise.toml"))]
    return sorted(exs, key=lambda e: (e.chapter, e.order, e.id))


def get(ex_id: str) -> Exercise:
    """The exercise `ex_id`: read from its own folder (exercises/<id>/, where every exercise lives: a test
    holds the folders to the ids), else found among all of them, or UnknownExercise with the nearest id."""
    if re.fullmatch(r"\w+", ex_id or "") and (config.EXERCISES_DIR / ex_id / "exercise.toml").is_file():
        ex = load(config.EXERCISES_DIR / ex_id)     # one file, not every exercise's: each check asks twice
        if ex.id == ex_id:
            return ex
    exs = {e.id: e for e in all_exercises()}
    if ex_id in exs:
        return exs[ex_id]
    close = difflib.get_close_matches(ex_id, list(exs), n=1, cutoff=0.4)
    raise UnknownExercise(ex_id, close[0] if close else None)


# ------------------------------------------------------------------------------------------ files
def import_file(path, name: str | None = None):
    """Import a Python file as a fresh module (learners' files, checks, references)."""
    path = Path(path)
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod          # so the module can find itself (sys.modules[__name__], dataclasses)
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def grader(ex: "Exercise"):
    """The exercise's check(sub): its check.py's own, or, for a GPU exercise whose check.py defines only
    inputs/outputs/reference/launch/work, the shared CUDA flow (judge.grading.cuda_flow.grade) over that module.
    (In a learners' release a Python exercise has no check.py: judge.grading.check_child grades it on its
    statement's worked examples instead.)"""
    mod = import_file(ex.folder / "check.py", f"check_{ex.id}")
    if callable(getattr(mod, "check", None)):
        return mod.check
    from judge.grading import cuda_flow
    return lambda sub: cuda_flow.grade(sub, mod)


def make_starter(solution: str) -> str:
    """The starter a solution gives: each BEGIN/END SOLUTION region replaced by its `#>` / `//>` lines."""
    out, inside = [], False
    for line in solution.splitlines():
        if not inside and (m := _BEGIN.match(line)):
            inside, indent, mark = True, m.group(1), m.group(2)
            continue
        if inside and _END.match(line):
            inside = False
            continue
        if inside:
            s = line.strip()
            if s.startswith(mark + ">"):
                text = s[len(mark) + 1:]
                out.append(indent + text[1:] if text.startswith(" ") else indent + text)
            continue
        out.append(line)
    if inside:
        raise ValueError("BEGIN SOLUTION without END SOLUTION")
    return "\n".join(out) + "\n"
