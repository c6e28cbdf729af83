"""environment.yml (conda) and pyproject.toml (pip) describe the same environment."""
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
