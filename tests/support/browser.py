"""Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe: JSON messages
separated by NUL on fds 3 and 4), so the browser tests need no driver package or browser download.

    with Browser() as b:
        b.open(url)
        b.wait_for("document.body.innerText.includes('t00')")
        b.screenshot(tmp_path / "page.png")
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1600,1000", "--remote-debugging-pipe"]


def chromium() -> str | None:
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


class Browser:
    def __init__(self, executable: str | None = None) -> None:
        self.executable = executable or chromium()
        if not self.executable:
            raise RuntimeError("no chromium on PATH (Debian: apt-get install -y chromium)")
        self._id = 0
        self._buf = b""
        self.session: str | None = None

    def __enter__(self) -> Browser:
        self._profile = tempfile.mkdtemp(prefix="verlsweep-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # the browser reads commands on fd 3 and writes replies on fd 4
        self.proc = subprocess.Popen(
            [self.executable, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(3, 4), preexec_fn=lambda: (os.dup2(to_browser_r, 3), os.dup2(from_browser_w, 4)),
            start_new_session=True)
        os.close(to_browser_r)
        os.close(from_browser_w)
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable")
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.call("Browser.close", session=False, timeout=10)
        except Exception:  # noqa: BLE001 - it is going away either way
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        shutil.rmtree(self._profile, ignore_errors=True)

    def call(self, method: str, params: dict | None = None, *, session: bool = True, timeout: float = 60) -> dict:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buf:
                raw, self._buf = self._buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
            if time.monotonic() > deadline:
                raise TimeoutError(method)
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the pipe")
            self._buf += chunk

    def viewport(self, width: int, height: int) -> None:
        """The page's size as a window of `width` x `height` CSS pixels would give it."""
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False})

    def open(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})

    def eval(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 90) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.5)
        raise TimeoutError(f"never true: {expression}\npage text: {self.text()[:3000]}")

    def text(self) -> str:
        return self.eval("document.body ? document.body.innerText : ''") or ""

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        return path
