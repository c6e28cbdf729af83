"""tests/chapters/test_notebooks_stay_the_courses.py - a learner's run and Jupyter's autosave never change a tracked
notebook: JupyterLab started as the README says (practice/jupyter_config.py), driven in headless Chromium.

In a git repository made in tmp (the course's .gitignore, practice/jupyter_config.py and chapter 1's notebook,
committed), JupyterLab opens the chapter, a cell runs, autosave (set to 1 s here) saves it; then `git status`
shows no tracked change, and the learner's copy in workspace/chapters/ holds the cell's output. The same notebook
opened again is that copy. Needs Debian's chromium and playwright, as tests/grading/test_classroom.py does.

Run: PYTHONPATH=$PWD python -m pytest tests/chapters/test_notebooks_stay_the_courses.py -q
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


from judge import config
from tests.browser import chromium

ROOT = config.ROOT
CHAPTER = ROOT / "chapters" / "ch01_cp_async.ipynb"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _first_outputs(nb) -> list:
    """The outputs of the first code cell of a saved notebook ([] while there is none, or it is half written)."""
    try:
        cells = json.loads(nb.read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return []
    return next((c.get("outputs", []) for c in cells if c["cell_type"] == "code"), [])


def _git(repo, *args) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def test_running_a_chapter_and_its_autosave_change_no_tracked_file(tmp_path):
    exe, sync_api = chromium()
    repo = tmp_path / "course"
    (repo / "practice").mkdir(parents=True)
    (repo / "chapters").mkdir()
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    shutil.copy(ROOT / "practice" / "jupyter_config.py", repo / "practice" / "jupyter_config.py")
    nb = repo / "chapters" / CHAPTER.name
    shutil.copy(CHAPTER, nb)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "course")
    settings = tmp_path / "settings" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"autosaveInterval": 1}))
    port = _free_port()
    jupyter = Path(sys.executable).parent / "jupyter"
    cmd = [str(jupyter), "lab", "--config=practice/jupyter_config.py", "--notebook-dir=.", "--no-browser",
           f"--port={port}", "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
           f"--LabApp.user_settings_dir={tmp_path / 'settings'}", "--allow-root"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), MPLBACKEND="Agg", JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    server = subprocess.Popen(cmd, cwd=repo, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    copy = repo / "workspace" / "chapters" / CHAPTER.name
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                urllib.request.urlopen(base + "/api/status", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
            try:
                page = browser.new_page()
                page.goto(f"{base}/lab/tree/chapters/{CHAPTER.name}")
                cell = page.locator(".jp-Notebook .jp-CodeCell").first
                cell.wait_for(timeout=120_000)
                page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=120_000)
                page.wait_for_timeout(3000)      # the kernel's connection settles after its first idle
                cell.locator(".jp-InputArea-editor").click()
                page.keyboard.press("Control+Home")
                page.keyboard.type("print(1 + 41)  # a learner's edit\n")
                page.keyboard.press("Shift+Enter")
                page.wait_for_timeout(2000)
                if not cell.locator(".jp-OutputArea-output").count():     # not run yet: run it from the menu
                    cell.click()
                    page.get_by_role("menuitem", name="Run").click()
                    page.get_by_text("Run Selected Cell", exact=False).first.click()
                try:
                    cell.locator(".jp-OutputArea-output").first.wait_for(timeout=120_000)
                except Exception:
                    page.screenshot(path=os.environ.get("DEBUG_SHOT", "/dev/null"))
                    raise
                deadline = time.monotonic() + 60      # autosave, every second here: until it saved the output
                while time.monotonic() < deadline and "42" not in json.dumps(_first_outputs(copy)):
                    time.sleep(0.5)
            finally:
                browser.close()
    finally:
        server.terminate()
        try:
            log = server.communicate(timeout=20)[0]
        except subprocess.TimeoutExpired:
            server.kill()
            log = server.communicate()[0]
    assert copy.exists(), f"autosave wrote no copy in workspace/chapters/; the server said:\n{log[-3000:]}"
    saved = json.loads(copy.read_text())
    first = next(c for c in saved["cells"] if c["cell_type"] == "code")
    assert "a learner's edit" in "".join(first["source"]), first
    assert "42" in json.dumps(first["outputs"]) and "Traceback" not in json.dumps(first["outputs"]), first["outputs"]
    assert _git(repo, "status", "--porcelain", "--untracked-files=no") == "", _git(repo, "diff", "--stat")
    assert nb.read_bytes() == CHAPTER.read_bytes()
    assert "workspace/" not in _git(repo, "status", "--porcelain")      # the copy is ignored, not untracked
