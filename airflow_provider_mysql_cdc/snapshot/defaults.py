"""Defaults of the snapshot's settings, importable without the snapshot engine (the operators use
them as argument defaults when a DAG file is parsed; the engine imports PyMySQL and pyarrow).

No import at all.
"""

from __future__ import annotations

#: Rows per snapshot chunk (a chunk is one mapped task).
DEFAULT_CHUNK_ROWS = 250_000
#: Rows fetched from the server per batch (one Arrow record batch).
DEFAULT_FETCH_ROWS = 10_000
#: Seconds ``LOCK TABLES`` may wait for running transactions on the table before giving up; while
#: it waits, MySQL queues new writers of the table behind it, so this is kept short.
DEFAULT_LOCK_WAIT_TIMEOUT_SECONDS = 10
