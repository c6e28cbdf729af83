"""tests/browser.py - headless Chromium for the tests that drive a page: Debian's chromium through playwright.

    from tests.browser import chromium
    exe, sync_api = chromium()      # skips where there is none (fails in CI, which installs it: .ci/run)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])

Playwright's own browser download cannot work on the course's machines: `apt-get install -y chromium`.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


def chromium():
    """(path of Debian's chromium, playwright.sync_api); pytest.skip where either is missing, fail in CI."""
    exe = next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if Path(p).exists()), None) \
        or shutil.which("chromium")
    in_ci = os.environ.get("CI") == "true"
    if exe is None:
        if in_ci:
            pytest.fail("CI must run the browser test: .ci/run installs Debian's chromium, and it is not here")
        pytest.skip("no chromium here: `apt-get install -y chromium` (Debian's package; .ci/run installs it)")
    try:
        from playwright import sync_api
    except ImportError:
        if in_ci:
            raise
        pytest.skip("the playwright package is not installed (pip install -e '.[dev]' installs it)")
    return exe, sync_api
