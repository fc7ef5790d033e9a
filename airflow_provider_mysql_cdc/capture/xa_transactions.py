"""Two-phase XA transactions in a window: which rows count, and which tables must be taken again.

MySQL logs a two-phase XA transaction as two GTID transactions (checked on 9.7.4 with ``SHOW BINLOG
EVENTS``): the first holds its rows and ends in an ``XA_prepare`` event (``XA PREPARE X'6162',X'',1``);
a later one is the single statement ``XA COMMIT X'6162',X'',1`` or ``XA ROLLBACK ...``. The rows count
from the commit on, and never after a rollback. While the transaction is prepared it keeps its row
locks, so no other transaction changes those rows in between: staging them where the prepare is
logged gives each row the value it has once committed.

The capture stages a prepared transaction's rows like any others and keeps the window open until the
outcome of every XA transaction prepared in it has been read (a window never publishes rows MySQL has
not committed). :class:`XaTransactions` then says which tables wait for a fresh snapshot:

* a rollback: each table the prepare staged rows of, from its first such row (the apply leaves out
  rows from there on; the next snapshot takes the table);
* a commit of a prepare whose rows of a table were left out because a snapshot's frontier holds the
  prepare but not the commit (that snapshot would hold neither its rows nor the commit): that table.
  A snapshot chunk reads its frontier under ``LOCK TABLES ... READ``, which waits for a prepared XA
  transaction's metadata locks (checked: it waits until the commit), so this is a guard, not a case
  MySQL makes.

The commit of a transaction prepared before the window (before the pipeline's first frontier: every
window after reads on to the outcome of what it prepared) is :meth:`XaTransactions.commit`'s None: its
rows are in every snapshot taken under those locks, and in nothing for a pipeline without one. A
rollback of such a transaction changes nothing. Pure logic: the window reader feeds it and turns its
answers into rebuild requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_mysql_cdc.core.ddl_statements import TableRef

__all__ = ["PreparedXa", "XaTransactions", "XaWait"]


@dataclass(frozen=True)
class PreparedXa:
    """An XA transaction prepared in the window, its outcome not read yet."""

    #: The GTID of the transaction that prepared it (its rows).
    gtid: str
    #: Each table it staged rows of -> the ``_cdc_seq`` of the first of them.
    staged: dict[tuple[str, str], int]
    #: Tables some of whose rows were left out because a snapshot's frontier holds the prepare.
    held: frozenset[tuple[str, str]]


@dataclass(frozen=True)
class XaWait:
    """A table that waits for a fresh snapshot from ``seq`` on, because of transaction ``gtid``."""

    table: TableRef
    seq: int
    gtid: str
    reason: str


class XaTransactions:
    """The XA transactions of one window being read: fed the current transaction's rows, told of each
    ``XA PREPARE`` and outcome, it answers with the tables that must wait."""

    def __init__(self) -> None:
        #: xid -> the prepared transaction whose outcome the window has not read yet.
        self.prepared: dict[str, PreparedXa] = {}
        self._staged: dict[tuple[str, str], int] = {}
        self._held: set[tuple[str, str]] = set()

    @property
    def pending(self) -> bool:
        """Whether a transaction prepared in the window still awaits its commit or rollback."""
        return bool(self.prepared)

    def describe_pending(self) -> str:
        """The pending transactions, for a message: ``X'6162',X'',1 (prepared by uuid:7)``."""
        return ", ".join(f"{xid} (prepared by {p.gtid})" for xid, p in self.prepared.items())

    def start(self) -> None:
        """A transaction of the window begins."""
        self._staged.clear()
        self._held.clear()

    def staged(self, database: str, table: str, seq: int) -> None:
        """The current transaction stages rows of ``database.table`` from ``seq`` on."""
        self._staged.setdefault((database, table), seq)

    def held(self, database: str, table: str) -> None:
        """Rows of the current transaction are left out of ``database.table``: its snapshot holds them."""
        self._held.add((database, table))

    def prepare(self, xid: str, gtid: str) -> None:
        """The current transaction (``gtid``) ends in the ``XA PREPARE`` of ``xid``."""
        self.prepared[xid] = PreparedXa(gtid, dict(self._staged), frozenset(self._held))

    def rollback(self, xid: str, gtid: str) -> list[XaWait]:
        """Transaction ``gtid`` rolls ``xid`` back: the tables its prepare staged rows of wait from there."""
        prepared = self.prepared.pop(xid, None)
        if prepared is None:
            return []  # prepared before the window: nothing of it was staged, no snapshot holds its rows
        reason = (
            f"XA ROLLBACK of {xid} (transaction {gtid}): the rows its XA PREPARE (transaction {prepared.gtid}) "
            "logged were staged, and MySQL never committed them"
        )
        return [XaWait(TableRef(*table), seq, prepared.gtid, reason) for table, seq in sorted(prepared.staged.items())]

    def commit(self, xid: str, gtid: str, seq: int, snapshot_holds: Callable[[TableRef], bool]) -> list[XaWait] | None:
        """Transaction ``gtid`` (its change at ``seq``) commits ``xid``: the tables whose snapshot holds
        the prepare but not the commit (``snapshot_holds(table)``: the table's snapshot holds ``gtid``);
        None when ``xid`` was prepared before the window."""
        prepared = self.prepared.pop(xid, None)
        if prepared is None:
            return None
        reason = (
            f"XA COMMIT of {xid} (transaction {gtid}): the table's snapshot was taken while that XA "
            f"transaction was prepared, so it holds neither its rows (logged by transaction {prepared.gtid}) "
            "nor the commit"
        )
        waiting = sorted((TableRef(*table) for table in prepared.held), key=str)
        return [XaWait(table, seq, gtid, reason) for table in waiting if not snapshot_holds(table)]
