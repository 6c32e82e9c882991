"""A short live view of a running trial's output on the terminal (the full log goes to a file).

On a terminal: a rich Live panel with the last `lines` lines, cleared when the trial ends. Elsewhere
(CI, redirected stderr): only the lines that matter, step lines and classified error lines, so a
log of a 300-trial sweep stays readable.
"""
from __future__ import annotations

import sys
import threading
from collections import deque

from verlsweep.trial.classify import strip_prefix


class LiveTail:
    def __init__(self, title: str, lines: int):
        self.title = title
        self.lines = lines
        self._buf: deque[str] = deque(maxlen=max(lines, 1))
        self._lock = threading.Lock()
        self._live = None
        if lines > 0 and sys.stderr.isatty():
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self._render(), console=Console(stderr=True), transient=True,
                              refresh_per_second=4, redirect_stdout=False, redirect_stderr=False)

    def __enter__(self) -> LiveTail:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    def line(self, text: str, *, important: bool = False) -> None:
        if self.lines <= 0:
            return
        text = strip_prefix(text.rstrip("\n"))
        if self._live is not None:
            with self._lock:
                self._buf.append(text)
                self._live.update(self._render())
        elif important:
            sys.stderr.write(f"[{self.title}] {text[:300]}\n")
            sys.stderr.flush()

    def _render(self):
        from rich.panel import Panel
        from rich.text import Text

        body = Text("\n".join(line[:200] for line in self._buf), no_wrap=True, overflow="ellipsis")
        return Panel(body, title=self.title, title_align="left", height=self.lines + 2)
