"""Progress of a long step, from the code doing the work to the console showing it.

The work calls :func:`report` with a line of counts (``"1,024 of 1,797 frames, 2,345,678 cycles"``); with nobody
listening that costs a context-variable read. :func:`showing` listens for a block and shows what it reports: on a
terminal a rich spinner with the elapsed time and the latest report, elsewhere (a log, a pipe) plain lines, at
most one every ``interval`` seconds and the last one at the end, without spinners or ANSI codes. Work that
reports from other threads (a simulation's log readers, Dask's event loop) takes the listener along with
:func:`relay`: a context variable does not follow a thread.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

Listener = Callable[[str], None]
#: Seconds between two plain progress lines of one step.
PLAIN_INTERVAL_S = 10.0
_LISTENER: ContextVar[Listener | None] = ContextVar("streamc_progress", default=None)


def report(text: str) -> None:
    """Tell whoever shows the current step's progress ``text`` (the counts so far); nothing when nobody does."""
    listener = _LISTENER.get()
    if listener is not None:
        listener(text)


def relay() -> Listener:
    """:func:`report` bound to this context's listener, to be called from any thread."""
    listener = _LISTENER.get()
    return listener if listener is not None else _ignore


def _ignore(text: str) -> None:
    """Where reports go while nobody shows them."""


@contextlib.contextmanager
def showing(console: Console, title: str, *, note: str | None = None,
            interval: float = PLAIN_INTERVAL_S) -> Iterator[None]:
    """Show ``title`` and what the block reports on ``console`` while it runs (see the module's description); on a
    terminal with ``note`` after the title."""
    if console.is_terminal:
        progress = Progress(SpinnerColumn(), TimeElapsedColumn(), TextColumn("[bold]{task.description}[/bold]"),
                            TextColumn("{task.fields[status]}"), console=console, transient=True)
        task = progress.add_task(escape(f"{title}: {note}" if note else title), status="")
        with progress, _listening(lambda text: progress.update(task, status=escape(text))):
            yield
        return
    lines = _PlainLines(console, title, interval)
    try:
        with _listening(lines.show):
            yield
    finally:
        lines.flush()


class _PlainLines:
    """Reports as ``title: text`` lines, one every ``interval`` seconds and none repeated; :meth:`flush` prints
    the last one held back."""

    def __init__(self, console: Console, title: str, interval: float):
        self.console, self.title, self.interval = console, title, interval
        self.printed_at, self.printed, self.held = -float("inf"), None, None
        self.lock = threading.Lock()

    def show(self, text: str) -> None:
        with self.lock:
            if time.monotonic() - self.printed_at < self.interval:
                self.held = text
            else:
                self._print(text)

    def flush(self) -> None:
        with self.lock:
            if self.held is not None:
                self._print(self.held)

    def _print(self, text: str) -> None:
        self.held = None
        if text != self.printed:
            self.printed_at, self.printed = time.monotonic(), text
            self.console.print(f"{self.title}: {text}", markup=False, highlight=False, soft_wrap=True)


@contextlib.contextmanager
def _listening(listener: Listener) -> Iterator[None]:
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)
