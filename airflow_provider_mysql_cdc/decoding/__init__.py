"""Every conversion of a MySQL value into the value staged, shared by snapshot and binlog capture.

One owner, in a neutral place (as Materialize keeps one decoder for snapshot and replication): the
snapshot never borrows the binlog reader's helpers and vice versa. Import the modules themselves;
this package imports nothing, and no module of it changes python-mysql-replication when imported
(the library fixes are installed explicitly, see :mod:`.library_fixes`).

Shared value conversions
    :mod:`.charsets` (MySQL character sets -> text decoders), :mod:`.values` (``InvalidValue``,
    temporal and DECIMAL encodings), :mod:`.json_text` (MySQL's JSON text, binary JSON),
    :mod:`.converters` (the per-column converter of stored values).
Binlog rows
    :mod:`.table_map` (column specs from a table map), :mod:`.library_fixes` (table-map parsing
    repairs), :mod:`.binlog_values` (value readers), :mod:`.binlog_rows` (``decoded_rows``,
    ``RowConverter``: the library path), :mod:`.compiled_rows` (decoders generated per table
    version: capture's fast path).
Text-protocol rows (snapshot)
    :mod:`.text_rows` (``SELECT`` expressions, ``SnapshotRowConverter``: the per-value path),
    :mod:`.text_arrow` (``ArrowBatchDecoder``: raw row packets -> Arrow, a column at a time).

No Airflow import.
"""
