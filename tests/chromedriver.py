"""A tiny W3C WebDriver client for Debian's chromium + chromedriver, standard library only
(the report's browser test and scripts/report_screenshot.py use it)."""
from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]


def missing() -> str | None:
    """Why a browser session cannot start here, or None."""
    if not shutil.which("chromedriver"):
        return "chromedriver not found (apt-get install chromium chromium-driver; .ci/run does)"
    if not shutil.which(CHROMIUM) and not shutil.which("chromium"):
        return "chromium not found (apt-get install chromium)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """One headless chromium session driven through chromedriver's HTTP API on 127.0.0.1."""

    def __init__(self, width: int = 1280, height: int = 900):
        self.port = _free_port()
        self.profile = tempfile.TemporaryDirectory(prefix="ks-chromium-")
        self.driver = subprocess.Popen(["chromedriver", f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                if self._call("GET", "/status")["ready"]:
                    break
            except (OSError, KeyError):
                pass
            if time.monotonic() > deadline:
                self.driver.kill()
                raise RuntimeError("chromedriver did not start")
            time.sleep(0.1)
        caps = {"browserName": "chrome", "goog:loggingPrefs": {"browser": "ALL"},
                "goog:chromeOptions": {"binary": shutil.which(CHROMIUM) or shutil.which("chromium"),
                                       "args": FLAGS + [f"--user-data-dir={self.profile.name}",
                                                        f"--window-size={width},{height}"]}}
        try:
            self.session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})["sessionId"]
        except Exception:
            self.driver.kill()
            self.profile.cleanup()
            raise

    def _call(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                return json.loads(r.read())["value"]
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"webdriver {method} {path}: {e.read()[:500]!r}") from None

    def _session(self, method: str, path: str, body: dict | None = None):
        return self._call(method, f"/session/{self.session}{path}", body)

    def get(self, url: str) -> None:
        self._session("POST", "/url", {"url": url})

    def run(self, script: str, *args):
        """Run a function body in the page (`return ...` gives its value)."""
        return self._session("POST", "/execute/sync", {"script": script, "args": list(args)})

    def console(self) -> list[dict]:
        """Browser log entries since the last call (console messages and page errors)."""
        return self._session("POST", "/se/log", {"type": "browser"})

    def resize(self, width: int, height: int) -> None:
        self._session("POST", "/window/rect", {"width": width, "height": height})

    def screenshot(self) -> bytes:
        return base64.b64decode(self._session("GET", "/screenshot"))

    def close(self) -> None:
        try:
            self._call("DELETE", f"/session/{self.session}")
        finally:
            self.driver.terminate()
            try:
                self.driver.wait(10)
            except subprocess.TimeoutExpired:
                self.driver.kill()
            self.profile.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
