"""How the local MySQL test bed reports: :class:`LocalMySQLError` for failures, :func:`log` for progress."""

from __future__ import annotations

import sys


class LocalMySQLError(RuntimeError):
    """A local MySQL install or instance operation failed; the message says why and what to do."""


def log(message: str) -> None:
    """One progress line on stderr (stdout stays free for command output)."""
    print(f"[testbed.mysql] {message}", file=sys.stderr, flush=True)
