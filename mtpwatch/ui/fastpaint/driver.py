"""`HangupDriver`: Textual's Linux driver, ending the app when its terminal goes away.

Textual 8.2.8's `LinuxDriver` outlives a closed terminal (tmux kill-session, a dropped SSH
connection, the pty of a benchmark's parent closed): its writer thread (textual/drivers/
_writer_thread.py `WriterThread.run`) dies at the first write that fails with EIO, after which
the next 30 frames fill its queue and the 31st blocks the event loop for good in `Queue.put`
(`WriterThread.write`) — so a SIGHUP or SIGTERM handler that asks the loop to exit never runs,
and the process stays until SIGKILL (py-spy: MainThread in `Queue.put` from `App._display`). Its
input thread (linux_driver.py `run_input_thread`) reads EOF from the hung-up terminal and selects
again at once, forever: 100 % of a core.

Here a write that fails marks the terminal lost: every later write is dropped (the loop never
blocks) and the app is asked to exit with 129 (128 + SIGHUP), as on a SIGHUP; the input thread
ends the app the same way at EOF from a terminal, and stops reading (no spin) either way.
"""

from __future__ import annotations

import os
import selectors
import signal
import threading
from codecs import getincrementaldecoder
from collections.abc import Callable
from typing import IO, Any, cast

from textual._xterm_parser import XTermParser
from textual.driver import Driver
from textual.drivers._writer_thread import WriterThread
from textual.drivers.linux_driver import LinuxDriver

HANGUP_STATUS = 128 + signal.SIGHUP
"""The app's exit status when its terminal went away (as a SIGHUP's)."""


class _TerminalWriter(WriterThread):
    """`WriterThread` that drops what it cannot write instead of dying (and calls `on_lost` once)."""

    def __init__(self, file: IO[str], on_lost: Callable[[], None]) -> None:
        super().__init__(file)
        self._on_lost = on_lost
        self.lost = False
        """A write to the terminal failed: what follows is dropped."""

    def run(self) -> None:
        while True:
            text = self._queue.get()
            if text is None:
                break
            if self.lost:
                continue  # keep taking from the queue: a writer that stops would block the loop
            try:
                self._file.write(text)
                if self._queue.qsize() == 0:
                    self._file.flush()
            except (OSError, ValueError):
                self._lose()
        if not self.lost:
            try:
                self._file.flush()
            except (OSError, ValueError):
                self._lose()

    def _lose(self) -> None:
        self.lost = True
        self._on_lost()


class HangupDriver(LinuxDriver):
    """`LinuxDriver` that ends the app when the terminal hangs up, never blocking on it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._hung_up = threading.Event()
        self._writer: _TerminalWriter | None = None
        super().__init__(*args, **kwargs)

    # `LinuxDriver.start_application_mode` makes its `WriterThread` itself and starts it: the one
    # it assigns is replaced by a `_TerminalWriter` on the same file before it is started.
    @property
    def _writer_thread(self) -> WriterThread | None:
        return self._writer

    @_writer_thread.setter
    def _writer_thread(self, writer: WriterThread | None) -> None:
        self._writer = None if writer is None else _TerminalWriter(cast(IO[str], self._file), self._hangup)

    def _hangup(self) -> None:
        """The terminal is gone: ask the app to exit (once), from any thread."""
        if self._hung_up.is_set():
            return
        self._hung_up.set()
        self._loop.call_soon_threadsafe(self._app.exit, HANGUP_STATUS)

    def run_input_thread(self) -> None:
        """Textual's input loop (linux_driver.py `run_input_thread`), ending at EOF or a read error
        (the terminal hung up; a pipe on stdin ended) instead of selecting it again forever."""
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        try:
            while not self.exit_event.is_set():
                for _key, mask in selector.select(0.1):
                    if not mask & selectors.EVENT_READ:
                        continue
                    try:
                        data = os.read(self.fileno, 1024 * 4)
                    except OSError:
                        data = b""
                    if not data:
                        if self.input_tty:
                            self._hangup()
                        return
                    for event in parser.feed(decode(data)):
                        self.process_message(event)
                for event in parser.tick():
                    self.process_message(event)
        finally:
            selector.close()


def terminal_driver(chosen: type[Driver]) -> type[Driver]:
    """The driver to run with where Textual chose `chosen` (`App.get_driver_class`): `HangupDriver`
    for the Linux terminal's; the web (`textual serve`) and headless drivers as they are."""
    return HangupDriver if chosen is LinuxDriver else chosen
