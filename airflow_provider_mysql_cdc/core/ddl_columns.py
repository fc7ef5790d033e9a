"""Column definitions of MySQL DDL (pure): data types normalized the way
``information_schema.COLUMNS.COLUMN_TYPE`` prints them, column attributes, DEFAULT clauses; and the
table and database options of CREATE/ALTER TABLE and DATABASE.

Type facts checked on MySQL 9.7 (``COLUMN_TYPE`` of each written form):

* integer display widths are dropped except ``tinyint(1)`` (signed: ``BOOL``) and with ``ZEROFILL``
  (``int(10) unsigned zerofill``; default widths 3/5/8/10/20; ZEROFILL implies UNSIGNED);
  INT1/2/3/4/8, MIDDLEINT and INTEGER are aliases; SERIAL is ``bigint unsigned NOT NULL
  AUTO_INCREMENT UNIQUE``;
* DECIMAL/DEC/NUMERIC/FIXED default to (10,0); ``DECIMAL(5)`` is ``decimal(5,0)``; FLOAT(p) is
  ``float`` up to p=24 and ``double`` above; DOUBLE PRECISION, REAL and FLOAT8 are ``double`` (REAL is
  ``float`` under ``REAL_AS_FLOAT``), FLOAT4 ``float``;
* CHAR and BINARY default to length 1; ``CHAR(n) BYTE`` is ``binary(n)``; NCHAR, NVARCHAR and the
  NATIONAL forms are utf8mb3; ASCII is latin1, UNICODE ucs2; ``CHARACTER SET binary`` turns CHAR,
  VARCHAR and TEXT into BINARY, VARBINARY and BLOB; LONG / LONG VARCHAR are ``mediumtext``, LONG
  VARBINARY ``mediumblob``; ``BLOB(n)`` / ``TEXT(n)`` become the smallest type holding n bytes / n
  characters (TEXT(n) depends on the character set: left as ``text(n)`` until it is known);
* ENUM and SET labels lose trailing spaces; GEOMETRYCOLLECTION is ``geomcollection``; YEAR(4) is
  ``year``; VECTOR defaults to 2048 dimensions;
* ``explicit_defaults_for_timestamp`` is ON (the default since 8.0): a TIMESTAMP column gets no implicit
  NOT NULL, DEFAULT or ON UPDATE (the OFF rules are not followed).
"""

from __future__ import annotations

from typing import Any

from airflow_provider_mysql_cdc.core.ddl_charsets import charset_name, collation_name, max_bytes_per_char
from airflow_provider_mysql_cdc.core.ddl_statements import (
    ColumnDefinition,
    DefaultValue,
    GeneratedColumn,
    SetTableDefaults,
    TableOption,
)
from airflow_provider_mysql_cdc.core.ddl_tokens import BIT, HEX, NAME, NUMBER, STRING, WORD, TokenCursor
from airflow_provider_mysql_cdc.errors import DdlSyntaxError

_INTEGER_ALIASES = {
    "TINYINT": "tinyint",
    "INT1": "tinyint",
    "SMALLINT": "smallint",
    "INT2": "smallint",
    "MEDIUMINT": "mediumint",
    "INT3": "mediumint",
    "MIDDLEINT": "mediumint",
    "INT": "int",
    "INTEGER": "int",
    "INT4": "int",
    "BIGINT": "bigint",
    "INT8": "bigint",
}
_ZEROFILL_WIDTHS = {"tinyint": 3, "smallint": 5, "mediumint": 8, "int": 10, "bigint": 20}
_SPATIAL = {
    "GEOMETRY": "geometry",
    "POINT": "point",
    "LINESTRING": "linestring",
    "POLYGON": "polygon",
    "MULTIPOINT": "multipoint",
    "MULTILINESTRING": "multilinestring",
    "MULTIPOLYGON": "multipolygon",
    "GEOMETRYCOLLECTION": "geomcollection",
    "GEOMCOLLECTION": "geomcollection",
}
_TEXT_BY_SIZE = (("tinytext", 255), ("text", 65535), ("mediumtext", 16777215), ("longtext", 4294967295))
_BLOB_BY_SIZE = (("tinyblob", 255), ("blob", 65535), ("mediumblob", 16777215), ("longblob", 4294967295))
#: Maximum bytes of each TEXT/BLOB type.
LOB_BYTES = dict(_TEXT_BY_SIZE + _BLOB_BY_SIZE)
_TO_BINARY = {
    "char": "binary",
    "varchar": "varbinary",
    **{t: b for (t, _), (b, _) in zip(_TEXT_BY_SIZE, _BLOB_BY_SIZE, strict=True)},
}
#: Types whose values are text in a character set.
_CHARACTER_TYPES = frozenset({"char", "varchar", "enum", "set", *(name for name, _ in _TEXT_BY_SIZE)})
_CURRENT_TIMESTAMP = ("CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP")
_LABEL_ESCAPES = {"\\": "\\\\", "'": "''", "\0": "\\0", "\n": "\\n", "\r": "\\r", "\x1a": "\\Z"}


# -- data types -----------------------------------------------------------------------------------


def _length(cursor: TokenCursor) -> int | None:
    if cursor.at_punct("("):
        cursor.next()
        value = cursor.integer()
        cursor.expect_punct(")")
        return value
    return None


def _precision_scale(cursor: TokenCursor) -> tuple[int | None, int | None]:
    if not cursor.accept_punct("("):
        return None, None
    precision = cursor.integer()
    scale = None
    if cursor.accept_punct(","):
        scale = cursor.integer()
    cursor.expect_punct(")")
    return precision, scale


def _sign_and_zerofill(cursor: TokenCursor) -> tuple[bool, bool]:
    unsigned = zerofill = False
    while True:
        word = cursor.accept_word("UNSIGNED", "SIGNED", "ZEROFILL")
        if word is None:
            return unsigned or zerofill, zerofill
        unsigned = unsigned or word == "UNSIGNED"
        zerofill = zerofill or word == "ZEROFILL"


def quote_label(label: str) -> str:
    """An ENUM/SET label quoted as ``COLUMN_TYPE`` prints it."""
    return "'" + "".join(_LABEL_ESCAPES.get(char, char) for char in label) + "'"


def _labels(cursor: TokenCursor) -> tuple[str, ...]:
    cursor.expect_punct("(")
    labels = []
    while True:
        cursor.introducer()
        if cursor.peek().kind == HEX:
            raise cursor.error("hexadecimal ENUM/SET labels are not supported")
        labels.append(cursor.string().rstrip(" "))
        if not cursor.accept_punct(","):
            break
    cursor.expect_punct(")")
    return tuple(labels)


def _integer_type(base: str, cursor: TokenCursor) -> dict[str, Any]:
    width = _length(cursor)
    unsigned, zerofill = _sign_and_zerofill(cursor)
    text = base
    if zerofill:
        text += f"({width or _ZEROFILL_WIDTHS[base]})"
    elif base == "tinyint" and width == 1 and not unsigned:
        text += "(1)"
    text += " unsigned" if unsigned else ""
    text += " zerofill" if zerofill else ""
    return {"type_text": text, "mysql_type": base, "unsigned": unsigned}


def _numeric_type(base: str, cursor: TokenCursor, *, float_precision: bool = False) -> dict[str, Any]:
    precision, scale = _precision_scale(cursor)
    if float_precision and precision is not None and scale is None:  # FLOAT(p)
        if precision > 53:
            raise cursor.error("FLOAT precision above 53")
        base, precision = ("float" if precision <= 24 else "double"), None
    unsigned, zerofill = _sign_and_zerofill(cursor)
    if base == "decimal":
        precision = 10 if precision is None else precision
        scale = 0 if scale is None else scale
    text = base + (f"({precision},{scale})" if precision is not None and scale is not None else "")
    text += " unsigned" if unsigned else ""
    text += " zerofill" if zerofill else ""
    fields: dict[str, Any] = {"type_text": text, "mysql_type": base, "unsigned": unsigned}
    if scale is not None:
        fields.update(precision=precision, scale=scale)
    return fields


def _string_type(base: str, length: int | None, charset: str | None = None) -> dict[str, Any]:
    return {
        "type_text": base if length is None else f"{base}({length})",
        "mysql_type": base,
        "length": length,
        "charset": charset,
    }


def _lob_type(family: tuple[tuple[str, int], ...], size: int) -> str:
    for name, capacity in family:
        if size <= capacity:
            return name
    raise DdlSyntaxError(f"length {size} is too large for a TEXT/BLOB column")


def _char_family(word: str, cursor: TokenCursor) -> dict[str, Any] | None:
    """CHAR/VARCHAR/NCHAR/NATIONAL/LONG forms; None when ``word`` is not one of them."""
    national = word in ("NCHAR", "NATIONAL", "NVARCHAR")
    if word == "NATIONAL":
        word = cursor.expect_word("CHAR", "CHARACTER", "VARCHAR")
    if word in ("CHAR", "CHARACTER", "NCHAR") and cursor.accept_word("VARYING", "VARCHAR"):
        word = "VARCHAR"
    if word == "LONG":
        if cursor.accept_word("VARBINARY"):
            return _string_type("mediumblob", None)
        if cursor.accept_word("VARCHAR") or cursor.accept_words("CHAR", "VARYING"):
            pass
        return _string_type("mediumtext", None)
    charset = "utf8mb3" if national else None
    if word in ("VARCHAR", "VARCHARACTER", "NVARCHAR"):
        length = _length(cursor)
        if length is None:
            raise cursor.error("VARCHAR needs a length")
        return _string_type("varchar", length, charset)
    if word in ("CHAR", "CHARACTER", "NCHAR"):
        length = _length(cursor)
        length = 1 if length is None else length
        if cursor.accept_word("BYTE"):
            return _string_type("binary", length)
        return _string_type("char", length, charset)
    return None


def parse_data_type(cursor: TokenCursor) -> dict[str, Any]:
    """A data type and its CHARACTER SET / COLLATE / BINARY attributes, as ColumnDefinition fields."""
    token = cursor.next()
    if token.kind != WORD:
        raise DdlSyntaxError(f"expected a data type at offset {token.start}")
    word = token.value.upper()
    fields = _base_type(word, cursor)
    if fields is None:
        raise DdlSyntaxError(f"unknown data type {token.value!r} at offset {token.start}")
    if fields["mysql_type"] in _CHARACTER_TYPES:
        _charset_attributes(cursor, fields)
    return fields


def _base_type(word: str, cursor: TokenCursor) -> dict[str, Any] | None:
    if word in _INTEGER_ALIASES:
        return _integer_type(_INTEGER_ALIASES[word], cursor)
    if word in ("BOOL", "BOOLEAN"):
        return {"type_text": "tinyint(1)", "mysql_type": "tinyint"}
    if word == "SERIAL":
        return {
            "type_text": "bigint unsigned",
            "mysql_type": "bigint",
            "unsigned": True,
            "nullable": False,
            "auto_increment": True,
            "unique": True,
        }
    if word in ("DECIMAL", "DEC", "NUMERIC", "FIXED"):
        return _numeric_type("decimal", cursor)
    if word in ("FLOAT", "FLOAT4"):
        return _numeric_type("float", cursor, float_precision=word == "FLOAT")
    if word in ("DOUBLE", "FLOAT8", "REAL"):
        if word == "DOUBLE":
            cursor.accept_word("PRECISION")
        return _numeric_type("float" if word == "REAL" and cursor.real_as_float else "double", cursor)
    if word == "BIT":
        bits = _length(cursor) or 1
        return {"type_text": f"bit({bits})", "mysql_type": "bit", "length": bits}
    if word in ("DATETIME", "TIMESTAMP", "TIME"):
        fsp = _length(cursor) or 0
        return {"type_text": word.lower() + (f"({fsp})" if fsp else ""), "mysql_type": word.lower(), "fsp": fsp}
    if word == "DATE":
        return {"type_text": "date", "mysql_type": "date"}
    if word == "YEAR":
        _length(cursor)
        return {"type_text": "year", "mysql_type": "year"}
    char_family = _char_family(word, cursor)
    if char_family is not None:
        return char_family
    if word in ("BINARY", "VARBINARY"):
        length = _length(cursor)
        if length is None and word == "VARBINARY":
            raise cursor.error("VARBINARY needs a length")
        return _string_type(word.lower(), 1 if length is None else length)
    if word in ("TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "TINYTEXT", "MEDIUMTEXT", "LONGTEXT"):
        return _string_type(word.lower(), None)
    if word == "BLOB":
        size = _length(cursor)
        return _string_type("blob" if size is None else _lob_type(_BLOB_BY_SIZE, size), None)
    if word == "TEXT":
        size = _length(cursor)
        fields = _string_type("text", None)
        if size is not None:
            fields.update(type_text=f"text({size})", length=size)  # resolved once the charset is known
        return fields
    if word in ("ENUM", "SET"):
        labels = _labels(cursor)
        kind = word.lower()
        return {
            "type_text": f"{kind}({','.join(quote_label(label) for label in labels)})",
            "mysql_type": kind,
            f"{kind}_values": labels,
        }
    if word == "JSON":
        return {"type_text": "json", "mysql_type": "json"}
    if word in _SPATIAL:
        return {"type_text": _SPATIAL[word], "mysql_type": "geometry"}
    if word == "VECTOR":
        dimensions = _length(cursor) or 2048
        return {"type_text": f"vector({dimensions})", "mysql_type": "vector", "length": dimensions}
    return None


def _charset_attributes(cursor: TokenCursor, fields: dict[str, Any]) -> None:
    """CHARACTER SET x, CHARSET x, COLLATE x, BINARY, ASCII, UNICODE after a character type."""
    while True:
        if cursor.accept_words("CHARACTER", "SET") or cursor.accept_word("CHARSET"):
            fields["charset"] = charset_name(cursor.name_or_string())
        elif cursor.accept_word("COLLATE"):
            fields["collation"] = collation_name(cursor.name_or_string())
        elif cursor.accept_word("BINARY"):
            fields["binary_collation"] = True
        elif cursor.accept_word("ASCII"):
            fields["charset"] = "latin1"
        elif cursor.accept_word("UNICODE"):
            fields["charset"] = "ucs2"
        else:
            break
    if fields.get("charset") == "binary" and fields["mysql_type"] in _TO_BINARY:
        binary = _TO_BINARY[fields["mysql_type"]]
        fields.update(mysql_type=binary, charset=None, collation=None)
        fields.pop("binary_collation", None)
        fields["type_text"] = binary + (f"({fields['length']})" if fields.get("length") is not None else "")


def text_type_for(length: int, charset: str | None) -> str | None:
    """The type ``TEXT(length)`` becomes in ``charset`` (None when the charset is unknown)."""
    per_char = max_bytes_per_char(charset)
    return None if per_char is None else _lob_type(_TEXT_BY_SIZE, length * per_char)


# -- defaults -------------------------------------------------------------------------------------


def _current_timestamp(cursor: TokenCursor) -> DefaultValue | None:
    word = cursor.accept_word(*_CURRENT_TIMESTAMP)
    if word is None:
        return None
    fsp = None
    if cursor.accept_punct("("):
        if not cursor.at_punct(")"):
            fsp = cursor.integer()
        cursor.expect_punct(")")
    elif word == "NOW":
        raise cursor.error("NOW needs parentheses")
    return DefaultValue("current_timestamp", "CURRENT_TIMESTAMP" + (f"({fsp})" if fsp else ""))


def parse_default(cursor: TokenCursor) -> DefaultValue:
    """The value after DEFAULT: literal, NULL, TRUE/FALSE, CURRENT_TIMESTAMP[(n)] or ``(expression)``."""
    if cursor.at_punct("("):
        return DefaultValue("expression", cursor.text(cursor.balanced()))
    if cursor.accept_word("NULL"):
        return DefaultValue("null")
    word = cursor.accept_word("TRUE", "FALSE")
    if word:
        return DefaultValue("bool", word)
    current = _current_timestamp(cursor)
    if current is not None:
        return current
    return parse_literal(cursor)


def parse_literal(cursor: TokenCursor) -> DefaultValue:
    """A signed number, a string (with introducer), or a hexadecimal/bit literal."""
    negative = False
    while cursor.at_punct("-", "+"):
        negative ^= cursor.next().value == "-"
    token = cursor.peek()
    if token.kind == NUMBER:
        cursor.next()
        return DefaultValue("number", ("-" if negative else "") + token.value)
    if negative:
        raise cursor.error("expected a number after the sign")
    charset = cursor.introducer()
    token = cursor.peek()
    if token.kind == STRING:
        charset = charset or token.charset
        return DefaultValue("string", cursor.string(), charset)
    if token.kind in (HEX, BIT):
        cursor.next()
        return DefaultValue("hex" if token.kind == HEX else "bit", token.value, charset)
    raise cursor.error("expected a literal")


# -- column definitions ---------------------------------------------------------------------------

_STOP_WORDS = ("FIRST", "AFTER")


def _generated(cursor: TokenCursor) -> GeneratedColumn:
    cursor.accept_words("GENERATED", "ALWAYS")
    cursor.expect_word("AS")
    expression = cursor.text(cursor.balanced()[1:-1])
    stored = cursor.accept_word("VIRTUAL", "STORED") == "STORED"
    return GeneratedColumn(expression, stored)


def _skip_reference(cursor: TokenCursor) -> None:
    cursor.qualified_name()
    if cursor.at_punct("("):
        cursor.balanced()
    while True:
        if cursor.accept_word("MATCH"):
            cursor.expect_word("FULL", "PARTIAL", "SIMPLE")
        elif cursor.accept_word("ON"):
            cursor.expect_word("DELETE", "UPDATE")
            if not cursor.accept_word("RESTRICT", "CASCADE"):
                if cursor.accept_word("SET"):
                    cursor.expect_word("NULL", "DEFAULT")
                else:
                    cursor.expect_word("NO")
                    cursor.expect_word("ACTION")
        else:
            return


def _column_attribute(cursor: TokenCursor, fields: dict[str, Any]) -> bool:
    """Consume one column attribute into ``fields``; False when none is next."""
    if cursor.accept_words("NOT", "NULL"):
        fields["nullable"] = False
    elif cursor.accept_word("NULL"):
        fields["nullable"] = True
    elif cursor.accept_words("NOT", "SECONDARY"):
        pass
    elif cursor.accept_word("DEFAULT"):
        fields["default"] = parse_default(cursor)
    elif cursor.accept_words("ON", "UPDATE"):
        if _current_timestamp(cursor) is None:
            raise cursor.error("ON UPDATE needs CURRENT_TIMESTAMP")
        fields["on_update_current_timestamp"] = True
    elif cursor.accept_word("AUTO_INCREMENT"):
        fields["auto_increment"] = True
    elif cursor.accept_word("UNIQUE"):
        cursor.accept_word("KEY")
        fields["unique"] = True
    elif cursor.accept_words("PRIMARY", "KEY") or cursor.accept_word("KEY"):
        fields.update(primary_key=True, nullable=False)
    elif cursor.accept_word("COMMENT"):
        fields["comment"] = cursor.string()
    elif cursor.at_word("COLLATE", "CHARACTER", "CHARSET", "BINARY", "ASCII", "UNICODE"):
        if fields["mysql_type"] not in _CHARACTER_TYPES:
            raise cursor.error("character set attribute on a non-character type")
        _charset_attributes(cursor, fields)
    elif cursor.accept_word("VISIBLE", "INVISIBLE"):
        fields["invisible"] = cursor.tokens[cursor.index - 1].value.upper() == "INVISIBLE"
    elif cursor.accept_word("COLUMN_FORMAT", "STORAGE"):
        cursor.expect_word("FIXED", "DYNAMIC", "DEFAULT", "DISK", "MEMORY")
    elif cursor.accept_word("ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE"):
        cursor.accept_punct("=")
        cursor.string()
    elif cursor.accept_word("SRID"):
        fields["srid"] = cursor.integer()
    elif cursor.at_word("GENERATED", "AS"):
        fields["generated"] = _generated(cursor)
    elif cursor.accept_word("REFERENCES"):
        _skip_reference(cursor)
    elif cursor.at_word("CONSTRAINT", "CHECK"):
        if cursor.accept_word("CONSTRAINT") and not cursor.at_word("CHECK"):
            cursor.identifier()
        cursor.expect_word("CHECK")
        cursor.balanced()
        if not cursor.accept_word("ENFORCED"):
            cursor.accept_words("NOT", "ENFORCED")
    elif cursor.accept_words("SERIAL", "DEFAULT", "VALUE"):
        fields.update(nullable=False, auto_increment=True, unique=True)
    else:
        return False
    return True


def parse_column_definition(cursor: TokenCursor, name: str) -> ColumnDefinition:
    """The data type and attributes of column ``name``, up to ``,``, ``)``, FIRST/AFTER or the end."""
    fields = parse_data_type(cursor)
    while not cursor.at_end() and not cursor.at_punct(",", ")") and not cursor.at_word(*_STOP_WORDS):
        if not _column_attribute(cursor, fields):
            raise cursor.error(f"unknown attribute of column {name!r}")
    return ColumnDefinition(name=name, **fields)


def uses_charset(definition: ColumnDefinition) -> bool:
    """True for columns whose values are text in a character set (CHAR, VARCHAR, TEXT, ENUM, SET)."""
    return definition.mysql_type in _CHARACTER_TYPES


# -- table and database options -------------------------------------------------------------------

_TABLE_OPTION_WORDS = frozenset(
    {
        *("ENGINE", "AUTO_INCREMENT", "AVG_ROW_LENGTH", "CHECKSUM", "TABLE_CHECKSUM", "COMPRESSION"),
        *("CONNECTION", "DELAY_KEY_WRITE", "ENCRYPTION", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE"),
        *("INSERT_METHOD", "KEY_BLOCK_SIZE", "MAX_ROWS", "MIN_ROWS", "PACK_KEYS", "PASSWORD", "ROW_FORMAT"),
        *("STATS_AUTO_RECALC", "STATS_PERSISTENT", "STATS_SAMPLE_PAGES", "COMMENT", "AUTOEXTEND_SIZE"),
        *("SECONDARY_ENGINE", "TABLESPACE", "UNION", "DATA", "INDEX", "TYPE"),
    }
)


def parse_table_option(cursor: TokenCursor) -> SetTableDefaults | TableOption | None:
    """One table option (ENGINE=..., DEFAULT CHARSET=..., ...) or None when none is next."""
    start = cursor.index
    cursor.accept_word("DEFAULT")
    if cursor.accept_words("CHARACTER", "SET") or cursor.accept_word("CHARSET"):
        cursor.accept_punct("=")
        charset = charset_name(cursor.name_or_string())
        collation = None
        if cursor.accept_word("COLLATE"):
            cursor.accept_punct("=")
            collation = collation_name(cursor.name_or_string())
        return SetTableDefaults(charset, collation)
    if cursor.accept_word("COLLATE"):
        cursor.accept_punct("=")
        return SetTableDefaults(None, collation_name(cursor.name_or_string()))
    if cursor.index != start or not cursor.at_word(*_TABLE_OPTION_WORDS):
        cursor.index = start
        return None
    word = cursor.next().value.upper()
    if word in ("DATA", "INDEX"):
        cursor.expect_word("DIRECTORY")
    cursor.accept_punct("=")
    value = cursor.peek()
    union: list[tuple[str | None, str]] = []
    if word == "UNION":
        cursor.expect_punct("(")
        while not cursor.accept_punct(")"):
            cursor.accept_punct(",")
            union.append(cursor.qualified_name())
    elif value.kind in (WORD, NAME, STRING, NUMBER):
        cursor.next()
    else:
        raise cursor.error(f"expected a value of {word}")
    if word == "TABLESPACE" and cursor.accept_word("STORAGE"):
        cursor.expect_word("DISK", "MEMORY")
    text = cursor.text(cursor.tokens[start : cursor.index])
    engine = value.value.upper() if word in ("ENGINE", "TYPE") else None
    return TableOption(text, engine, tuple(union))


def parse_database_options(cursor: TokenCursor) -> tuple[str | None, str | None]:
    """CREATE/ALTER DATABASE options; returns the (character set, collation) they set."""
    charset = collation = None
    while not cursor.at_end():
        cursor.accept_word("DEFAULT")
        if cursor.accept_words("CHARACTER", "SET") or cursor.accept_word("CHARSET"):
            cursor.accept_punct("=")
            charset = charset_name(cursor.name_or_string())
        elif cursor.accept_word("COLLATE"):
            cursor.accept_punct("=")
            collation = collation_name(cursor.name_or_string())
        elif cursor.accept_word("ENCRYPTION"):
            cursor.accept_punct("=")
            cursor.string()
        elif cursor.accept_words("READ", "ONLY"):
            cursor.accept_punct("=")
            cursor.next()
        else:
            raise cursor.error("unknown database option")
    return charset, collation
