"""A watch over ``/proc``: the argv and environment of the processes a test starts, while they run
(the secrets tests: a password must be in neither)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ProcessWatch:
    """Polls ``/proc`` for processes whose argv holds both ``script`` (which program: the apply job's
    script, ``pyspark-shell`` for a JVM pyspark starts) and ``marker`` (a path of this test: other tests
    may run the same programs meanwhile) and keeps each one's argv, the names of its environment
    variables, and the names of those that hold a needle."""

    marker: bytes = b"\0"
    needles: tuple[bytes, ...] = ()
    script: bytes = b"\0"
    argvs: set[tuple[str, ...]] = field(default_factory=set)
    environ_names: set[str] = field(default_factory=set)
    environ_hits: set[str] = field(default_factory=set)
    stop: threading.Event = field(default_factory=threading.Event)

    def poll(self) -> None:
        own = os.getpid()
        while not self.stop.is_set():
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit() or int(entry.name) == own:
                    continue
                try:
                    raw = Path(entry.path, "cmdline").read_bytes()
                    if self.script not in raw or self.marker not in raw:
                        continue
                    self.argvs.add(tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part))
                    environ = Path(entry.path, "environ").read_bytes()
                except OSError:  # the process ended meanwhile
                    continue
                for variable in environ.split(b"\0"):
                    self.environ_names.add(variable.split(b"=", 1)[0].decode(errors="replace"))
                    if any(needle in variable for needle in self.needles):
                        self.environ_hits.add(variable.split(b"=", 1)[0].decode(errors="replace"))
            time.sleep(0.02)


@contextlib.contextmanager
def watching(watch: ProcessWatch) -> Iterator[ProcessWatch]:
    """Poll for ``watch``'s processes in a thread while the block runs."""
    thread = threading.Thread(target=watch.poll, daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        watch.stop.set()
        thread.join(timeout=10)
