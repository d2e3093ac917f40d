"""`treadle serve` as the page's tests use it: a real subprocess on a SQLite file.

The server is started as a user would (``--port 0``: any free port), and
its address is read from the line it prints (``http://127.0.0.1:PORT/?token=T``),
as a user would copy it. Everything else it prints is kept, to show when
a test fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import httpx

HERE = Path(__file__).parent
TREADLE = str(Path(sys.executable).parent / "treadle")
_ADDRESS = re.compile(r"(http://127\.0\.0\.1:(\d+))/\?token=([A-Za-z0-9._~+/=%-]+)")


@dataclass
class Server:
    """A running ``treadle serve``: its address, token, and an API client."""

    process: subprocess.Popen[str]
    base: str
    token: str
    reader: threading.Thread
    output: list[str] = field(default_factory=list)

    @property
    def page_url(self) -> str:
        return f"{self.base}/?token={self.token}"

    def api(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base, headers={"Authorization": f"Bearer {self.token}"}, timeout=10
        )

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        self.reader.join(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def start_server(store: Path, *apps: str, beside: Path | None = None) -> Server:
    """Start ``treadle serve`` on the SQLite file ``store`` with ``apps`` from this directory.

    ``beside``: another directory the apps may come from too.
    """
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("TREADLE_")}
    # The test's own import path goes on after the apps': a worktree's src is what is served.
    paths = (HERE, beside, *os.environ.get("PYTHONPATH", "").split(os.pathsep))
    command = [TREADLE, "serve", "--store", f"sqlite:///{store}", "--port", "0"]
    for app in apps:
        command += ["--app", app]
    process = subprocess.Popen(
        command,
        env={**inherited, "PYTHONPATH": os.pathsep.join(map(str, filter(None, paths)))},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    found = threading.Event()
    address: list[str] = []

    def drain() -> None:
        # Read everything the server prints, so it never blocks on a full pipe.
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            match = _ADDRESS.search(line)
            if match and not address:
                address.extend([match.group(1), unquote(match.group(3))])
                found.set()
        found.set()

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    deadline = time.monotonic() + 20
    while not found.wait(0.1) and time.monotonic() < deadline:
        pass
    if not address:
        Server(process, "", "", reader, output).stop()
        raise AssertionError("treadle serve printed no address:\n" + "".join(output))
    return Server(process, address[0], address[1], reader, output)
