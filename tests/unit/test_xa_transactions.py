"""Two-phase XA transactions: the statements the binlog holds, and the tables that must wait."""

from __future__ import annotations

from airflow_provider_mysql_cdc.capture.binlog_reader import XaOutcome, xa_outcome, xa_xid
from airflow_provider_mysql_cdc.capture.xa_transactions import XaTransactions, XaWait
from airflow_provider_mysql_cdc.core.ddl_statements import TableRef

G1, G2 = "3e11fa47-71ca-11e1-9e33-c80aa9429562:7", "3e11fa47-71ca-11e1-9e33-c80aa9429562:9"


def test_the_xid_of_an_xa_prepare_event_and_of_its_commit_are_the_same_text() -> None:
    # SHOW BINLOG EVENTS on 9.7.4 after XA START 'ab', 'c''d', 7 ... XA PREPARE ... XA COMMIT:
    assert xa_xid(b"ab", b"c'd", 7) == "X'6162',X'632764',7"
    assert xa_outcome("XA COMMIT X'6162',X'632764',7") == XaOutcome("X'6162',X'632764',7", committed=True)
    assert xa_outcome("xa rollback X'00FF',X'',1") == XaOutcome(xa_xid(b"\x00\xff", b"", 1), committed=False)
    assert xa_outcome("XA COMMIT X'6162',X'',1 ONE PHASE") is None  # never a statement of its own
    assert xa_outcome("XA RECOVER") is None


def test_a_commit_in_the_window_leaves_every_table_applied() -> None:
    xa = XaTransactions()
    xa.start()
    xa.staged("db", "t", 10)
    xa.staged("db", "t", 11)
    xa.prepare("X'63',X'',1", G1)
    assert xa.pending and xa.describe_pending() == "X'63',X'',1 (prepared by " + G1 + ")"
    xa.start()  # other transactions run while it is prepared
    xa.staged("db", "u", 12)
    assert xa.commit("X'63',X'',1", G2, 13, lambda table: False) == []
    assert not xa.pending


def test_a_rollback_leaves_each_table_it_staged_rows_of_waiting_from_its_first_row() -> None:
    xa = XaTransactions()
    xa.start()
    xa.staged("db", "t", 20)
    xa.staged("db", "u", 21)
    xa.staged("db", "t", 22)
    xa.prepare("X'72',X'',1", G1)
    waits = xa.rollback("X'72',X'',1", G2)
    assert [(w.table, w.seq, w.gtid) for w in waits] == [(TableRef("db", "t"), 20, G1), (TableRef("db", "u"), 21, G1)]
    assert all(f"XA ROLLBACK of X'72',X'',1 (transaction {G2})" in w.reason for w in waits)
    assert xa.rollback("X'72',X'',1", G2) == []  # prepared before the window: nothing of it was staged


def test_rows_a_snapshot_holds_wait_when_the_snapshot_does_not_hold_the_commit() -> None:
    xa = XaTransactions()
    xa.start()
    xa.held("db", "t")  # the snapshot of t holds the prepare
    xa.held("db", "v")
    xa.staged("db", "u", 5)
    xa.prepare("X'70',X'',1", G1)
    waits = xa.commit("X'70',X'',1", G2, 30, lambda table: table == TableRef("db", "v"))
    assert waits == [
        XaWait(
            TableRef("db", "t"),
            30,
            G2,
            f"XA COMMIT of X'70',X'',1 (transaction {G2}): the table's snapshot was taken while that XA "
            f"transaction was prepared, so it holds neither its rows (logged by transaction {G1}) nor the commit",
        )
    ]
    assert xa.commit("X'70',X'',1", G2, 31, lambda table: False) is None  # prepared before the window


def test_each_transaction_starts_with_nothing_staged() -> None:
    xa = XaTransactions()
    xa.start()
    xa.staged("db", "t", 1)
    xa.held("db", "u")
    xa.start()
    xa.prepare("X'61',X'',1", G1)
    assert xa.rollback("X'61',X'',1", G2) == []
