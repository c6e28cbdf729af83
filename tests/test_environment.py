"""environment.yml (conda) and pyproject.toml (pip) describe the same environment; the README opens with the learner's commands.

Run: PYTHONPATH=$PWD python -m pytest tests/test_environment.py -q
"""
import re
import tomllib

from judge import config


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower()


def test_environment_yml_lists_exactly_the_pip_dependencies():
    py = tomllib.loads((config.ROOT / "pyproject.toml").read_text())["project"]
    want = {_norm(r) for r in py["dependencies"] + py["optional-dependencies"]["dev"]}
    lines = (config.ROOT / "environment.yml").read_text().splitlines()
    start = lines.index("  - pip:")
    got = {_norm(l.strip()[2:]) for l in lines[start + 1:] if l.strip().startswith("- ")}
    assert got == want, f"only in environment.yml: {got - want}; only in pyproject.toml: {want - got}"


def test_python_version_agrees():
    py = tomllib.loads((config.ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert f"python{py}" in (config.ROOT / "environment.yml").read_text().replace(" ", "")


def test_ci_runs_the_readme_test_command():
    # .ci/run runs each step of the README's command, in order (it waits for chromium between install and tests)
    readme = (config.ROOT / "README.md").read_text()
    command = next(line for line in readme.splitlines() if "-m pytest tests chapters" in line)
    ci = [line.strip() for line in (config.ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.strip().startswith("#")]
    steps = command.split(" && ")
    assert ci[-1] == steps[-1], "the last line of .ci/run must run the README's tests"
    at = [next((i for i, line in enumerate(ci) if step in line.split(" && ")), None) for step in steps]
    assert None not in at and at == sorted(at), f"each step of the README's test command, in order, in .ci/run: {at}"


def test_the_readme_opens_with_a_learners_quick_start():
    """The first section is the learner's: the two commands (set up and open through practice/jupyter_config.py,
    which keeps the notebooks the course's; start and check an exercise); CI's command comes further down."""
    readme = (config.ROOT / "README.md").read_text()
    first = readme.split("\n## ", 2)[1]
    assert first.startswith("Quick start\n"), first[:40]
    blocks = [b.split("```", 1)[0] for b in first.split("```bash\n")[1:]]
    assert len(blocks) == 2, blocks
    assert "jupyter lab --config=practice/jupyter_config.py" in blocks[0] and "pip install" in blocks[0]
    assert "python3 practice/judge.py start" in blocks[1] and "python3 practice/judge.py check" in blocks[1]
    assert "-m pytest" not in first and "Threat model" not in first and "Slurm" not in first
    assert (config.ROOT / "practice" / "jupyter_config.py").is_file()


def test_statements_and_readme_say_python3_and_the_cpu_models_verdict():
    import inspect
    from judge.grading import classroom
    said = [p.parent.name for p in (config.ROOT / "exercises").glob("*/README.md")
            if "python practice/judge.py" in p.read_text()]
    assert not said, f"statements that say python where the README says python3: {said}"
    readme = (config.ROOT / "README.md").read_text()
    assert "python practice/judge.py" not in readme
    assert '"CPU model only"' in inspect.getsource(classroom.verdict_source)
    assert "`PASS [CPU model only]`" in readme and "SKIP where a\nHopper GPU is needed" not in readme
