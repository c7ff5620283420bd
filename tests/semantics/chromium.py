"""Drive headless Chromium over the DevTools protocol on a pipe (no extra dependency).

``render(url)`` opens the page, waits for the load event, collects console errors,
uncaught exceptions and failed resource loads, evaluates a JavaScript expression and
captures a screenshot of the first screen. Chromium is started with
``--remote-debugging-pipe``: commands go to its fd 3 and replies come from its fd 4 as
NUL-terminated JSON messages.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-pipe",
]


@dataclass
class Rendered:
    errors: list[str] = field(default_factory=list)
    value: Any = None
    screenshot: bytes = b""


class _Pipe:
    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.w, self.r = write_fd, read_fd
        self.buf = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buf:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        out: dict[str, Any] = json.loads(msg)
        return out

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        self.next_id += 1
        req: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            req["sessionId"] = session
        os.write(self.w, json.dumps(req).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            msg = self._read_message(deadline)
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                res: dict[str, Any] = msg.get("result", {})
                return res
            self.events.append(msg)

    def wait_event(self, name: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for i, ev in enumerate(self.events):
            if ev.get("method") == name:
                return self.events.pop(i)
        while True:
            msg = self._read_message(deadline)
            if msg.get("method") == name:
                return msg
            self.events.append(msg)


def _errors(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for ev in events:
        m, p = ev.get("method"), ev.get("params", {})
        if m == "Runtime.exceptionThrown":
            out.append(f"exception: {p.get('exceptionDetails', {}).get('text')}")
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append(f"console.{p.get('type')}: {p.get('args')}")
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        elif m == "Network.loadingFailed":
            out.append(f"load failed: {p.get('errorText')}")
    return out


def render(url: str, expression: str, width: int = 1280, height: int = 900) -> Rendered:
    """Load ``url`` headless, return console errors, ``expression``'s value, a screenshot."""
    if CHROMIUM is None:
        raise RuntimeError("chromium is not installed (run `make browsers`)")
    profile = tempfile.mkdtemp(prefix="privtab-chromium-")
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()

    def _fds() -> None:  # runs in the child: fd 3 = commands in, fd 4 = replies out
        a, b = os.dup(to_child_r), os.dup(from_child_w)
        os.dup2(a, 3, inheritable=True)
        os.dup2(b, 4, inheritable=True)

    proc = subprocess.Popen(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_fds,
        close_fds=False,
    )
    os.close(to_child_r)
    os.close(from_child_w)
    pipe = _Pipe(to_child_w, from_child_r)
    try:
        target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            pipe.call(f"{domain}.enable", session=session)
        pipe.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        pipe.call("Page.navigate", {"url": url}, session=session)
        pipe.wait_event("Page.loadEventFired", timeout=60.0)
        value = pipe.call(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=session
        )["result"].get("value")
        shot = pipe.call("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
        errors = _errors(pipe.events)
        with contextlib.suppress(RuntimeError, TimeoutError):
            pipe.call("Browser.close", timeout=10.0)
        return Rendered(errors=errors, value=value, screenshot=base64.b64decode(shot))
    finally:
        os.close(to_child_w)
        os.close(from_child_r)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
