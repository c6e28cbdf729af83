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
    readme = (config.ROOT / "README.md").read_text()
    ci = (config.ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in readme, "the last line of .ci/run must be the README's test command"
