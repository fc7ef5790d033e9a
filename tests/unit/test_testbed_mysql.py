"""The pure parts of the local MySQL test bed: server URLs, settings to mysqld options, instance
configuration and its on-disk record, ELF ``DT_NEEDED`` reading."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from testbed.mysql import DEFAULT_SETTINGS, LocalMySQL, LocalMySQLError, parse_server_url
from testbed.mysql.elf import elf_needed
from testbed.mysql.settings import initialize_options, normalize_settings, server_options


def test_server_url_parts_are_url_decoded_and_defaulted() -> None:
    url = parse_server_url("mysql://ad%40min:p%3Aw%2Fd@db.example:3310")
    assert (url.scheme, url.host, url.port, url.user, url.password) == ("mysql", "db.example", 3310, "ad@min", "p:w/d")
    bare = parse_server_url("mysql://")
    assert (bare.host, bare.port, bare.user, bare.password) == ("127.0.0.1", 3306, "root", "")


def test_settings_are_normalized_and_managed_options_refused() -> None:
    assert normalize_settings({"Gtid-Mode": False, "binlog_format": "STATEMENT", "server-id": 7}) == {
        "gtid_mode": "OFF",
        "binlog_format": "STATEMENT",
        "server_id": "7",
    }
    with pytest.raises(LocalMySQLError, match="datadir is managed"):
        normalize_settings({"datadir": "/tmp/elsewhere"})
    with pytest.raises(LocalMySQLError, match="invalid server option name"):
        normalize_settings({"1bad": "x"})


def test_log_bin_becomes_the_basename_disable_or_a_path() -> None:
    base = Path("/data/binlog")
    assert server_options({"log_bin": "ON"}, base) == ["--log-bin=/data/binlog"]
    assert server_options({"log_bin": "off"}, base) == ["--disable-log-bin"]
    assert server_options({"log_bin": "/other/bl"}, base) == ["--log-bin=/other/bl"]
    assert server_options({"binlog_row_image": "MINIMAL"}, base) == ["--binlog-row-image=MINIMAL"]


def test_only_on_disk_format_options_go_to_initialize() -> None:
    settings = {**DEFAULT_SETTINGS, "lower_case_table_names": "1"}
    assert initialize_options(settings) == ["--lower-case-table-names=1"]


def test_instance_configuration_equality_server_id_and_saved_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MYSQL_CDC_LOCAL_MYSQL_DIR", str(tmp_path))
    assert LocalMySQL("a", 40001).server_id == 40001
    assert LocalMySQL("a", 40001, settings={"server_id": 0}).server_id == 0
    assert LocalMySQL("a", 40001, settings={"gtid_mode": False}) == LocalMySQL(
        "a", 40001, settings={"GTID-MODE": "OFF"}
    )
    with pytest.raises(LocalMySQLError, match="server_id given twice"):
        LocalMySQL("a", 40001, 5, settings={"server_id": 6})
    with pytest.raises(LocalMySQLError, match="invalid instance name"):
        LocalMySQL("../escape", 40001)
    # instance.json as start() writes it (and as existing instances already have it)
    record = tmp_path / "instances" / "b" / "instance.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"name": "b", "port": 40002, "server_id": 9, "settings": {"binlog_format": "MIXED"}}))
    assert LocalMySQL.load("b") == LocalMySQL("b", 40002, 9, {"binlog_format": "MIXED"})
    with pytest.raises(LocalMySQLError, match="no instance named 'c'"):
        LocalMySQL.load("c")


def test_elf_needed_reads_the_interpreters_shared_libraries(tmp_path: Path) -> None:
    needed = elf_needed(Path(sys.executable).resolve())
    assert any(name.startswith("libc.so.") for name in needed)
    text = tmp_path / "not-elf"
    text.write_text("#!/bin/sh\n")
    assert elf_needed(text) == []
