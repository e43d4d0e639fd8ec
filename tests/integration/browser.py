"""Debian's chromium driven headless by Playwright, and the console app served in-process, for the
console and simulator-report tests."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless chromium; skipped where it is not installed, a failure in CI (scripts/setup installs it)."""
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"chromium is missing at {CHROMIUM}: scripts/setup installs it")
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # --no-sandbox: CI and these machines run as root, where Chromium refuses its sandbox.
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"], timeout=30_000)
        try:
            yield b
        finally:
            b.close()


def recording_page(browser: Any, timeout_ms: int = 10_000) -> tuple[Any, list[str]]:
    """A new page and the list its console errors and uncaught exceptions are appended to."""
    page = browser.new_page()
    page.set_default_timeout(timeout_ms)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"exception: {e}"))
    return page, errors


@contextmanager
def served(app: Any) -> Iterator[str]:
    """An ASGI app served by uvicorn on a free 127.0.0.1 port, in a thread; yields its base URL."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "the console did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
