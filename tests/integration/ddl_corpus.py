"""The DDL corpus of tests/integration/test_ddl_tracking.py: scenarios of statements run on MySQL.

Each scenario runs in its own database(s) (``ddl_<name>``; a second one ``ddl_<name>_b`` when it asks
for it), on one session with the scenario's sql_mode, statements in order. Statements starting with
INSERT, UPDATE, DELETE or SET change data or the session and are not fed to the model; every other
statement is a corpus statement: the model must follow it through what MySQL wrote to the binlog.

Ideas come from the cases other projects test (Debezium's MySQL DDL parser tests, Flink CDC and
Materialize schema-change tests, python-mysql-replication): swaps, rename chains, DROP of several
tables, CREATE ... LIKE / SELECT, quoting, comments, generated and invisible columns, ENUM/SET and
character set changes; the statements are written for this corpus.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DATA_PREFIXES = ("INSERT", "UPDATE", "DELETE", "SET")


@dataclass(frozen=True)
class Scenario:
    """Statements run in order in database ``ddl_<name>`` (and ``ddl_<name>_b`` when ``second_database``)."""

    name: str
    statements: tuple[str, ...]
    sql_mode: str = "DEFAULT"
    second_database: bool = False
    #: Give the model the databases' default character set (utf8mb4) for CREATE TABLEs without one.
    database_defaults: bool = True
    #: Statements (by text) the parser is expected to report as UnparsedDdl.
    unparsed: frozenset[str] = field(default_factory=frozenset)

    @property
    def database(self) -> str:
        """The scenario's session database."""
        return f"ddl_{self.name}"

    @property
    def databases(self) -> tuple[str, ...]:
        """Every database the scenario uses."""
        return (self.database, f"{self.database}_b") if self.second_database else (self.database,)


def is_data(statement: str) -> bool:
    """True for the statements that are not fed to the model (DML and SET)."""
    return statement.lstrip().upper().startswith(DATA_PREFIXES)


CREATE_FORMS = Scenario(
    "create",
    (
        "CREATE TABLE t1 (id INT PRIMARY KEY, a VARCHAR(10), b DECIMAL(10,2) NOT NULL DEFAULT '0.00') ENGINE=InnoDB",
        "CREATE TABLE `t 2` (`id` BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, `na.me` CHAR(3) CHARACTER SET latin1,"
        " `b``q` TEXT, PRIMARY KEY (`id`)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
        "create table if not exists T3 (Id int, key k (Id), unique key u (Id), constraint c check (Id > 0))"
        " comment='x', row_format=dynamic",
        "CREATE TABLE IF NOT EXISTS t1 (x INT)",
        "INSERT INTO t1 VALUES (1, 'a', 1.50), (2, NULL, -3.25)",
        "CREATE TABLE t4 LIKE t1",
        "CREATE TABLE t5 (LIKE `t 2`)",
        "CREATE TABLE t6 AS SELECT id, a FROM t1",
        "CREATE TABLE t7 (PRIMARY KEY (id)) SELECT 1 AS id, 'x' AS s, 1.5 AS d",
        "CREATE TABLE IF NOT EXISTS t7 SELECT 2 AS id",
        "CREATE TABLE café (ñ INT, `日本` VARCHAR(3), `a b` INT)",
        "/* lead */ CREATE /*!50100 TABLE */ t8 (id INT) /*!80016 ENGINE=InnoDB */ -- trailing",
        "CREATE TABLE t9 (id SERIAL, b BOOL, c INT1, d INT8, e MIDDLEINT, f INTEGER(3) UNSIGNED ZEROFILL,"
        " g NUMERIC(7,3), h FIXED(4,1), i FLOAT(10), j FLOAT(30), k DOUBLE PRECISION, l REAL, m FLOAT4,"
        " n FLOAT8, o DEC(3,3), p TINYINT(1) UNSIGNED, q BIGINT ZEROFILL, r SMALLINT SIGNED, s BOOLEAN)",
        "CREATE TABLE t10 (a CHAR, b NCHAR(4), c NATIONAL VARCHAR(4), d CHARACTER VARYING(9), e CHAR(10) BYTE,"
        " f BINARY, g VARCHAR(5) BINARY, h VARCHAR(5) ASCII, i VARCHAR(5) UNICODE,"
        " j VARCHAR(5) CHARACTER SET binary, k TEXT CHARACTER SET binary, l CHAR(3) CHARSET utf8, m LONG,"
        " n LONG VARCHAR, o LONG VARBINARY, p TEXT(100), q BLOB(300), r TEXT(20) CHARACTER SET latin1,"
        " s NVARCHAR(2), t NCHAR VARCHAR(3), u NATIONAL CHAR(2), v TEXT(63), w TINYBLOB, x MEDIUMBLOB,"
        " y LONGTEXT, z TINYTEXT)",
        "CREATE TABLE t11 (a ENUM('a''b','c\\\\d','e\"f','g  ','h'), b SET('x','y') CHARACTER SET latin1,"
        " c ENUM('a') COLLATE utf8mb4_bin, d YEAR(4), e TIME(3), f DATETIME(0), g TIMESTAMP(6) NULL DEFAULT NULL,"
        " h GEOMETRYCOLLECTION, i POINT NOT NULL SRID 4326, j VECTOR(3), k JSON, l BIT, m BIT(17), n GEOMETRY,"
        " o LINESTRING, p POLYGON, q MULTIPOINT, r MULTILINESTRING, s MULTIPOLYGON, t GEOMCOLLECTION, u VECTOR)",
        "CREATE TABLE t12 (a INT, b INT AS (a + 1) VIRTUAL, c INT GENERATED ALWAYS AS (a * 2) STORED NOT NULL,"
        " d VARCHAR(10) INVISIBLE DEFAULT 'h', e TIMESTAMP DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,"
        " f DATETIME(3) DEFAULT NOW(3), g INT DEFAULT (a + 10), h JSON DEFAULT (JSON_ARRAY()), PRIMARY KEY (a))",
        "CREATE TABLE t13 (a INT NOT NULL, b INT NOT NULL, c VARCHAR(20), PRIMARY KEY (b, a), KEY (c(5)),"
        " FULLTEXT KEY ft (c)) ENGINE=InnoDB",
        "CREATE TABLE t14 (id INT KEY, p INT REFERENCES t1 (id), c INT CHECK (c > 0), u INT UNIQUE,"
        " v INT COMMENT 'the v' COLUMN_FORMAT FIXED, w INT NULL DEFAULT NULL, x INT NOT SECONDARY)",
        "CREATE TABLE t15 (id INT PRIMARY KEY) PARTITION BY HASH (id) PARTITIONS 4",
        "CREATE TEMPORARY TABLE tmp (id INT)",
        "CREATE TABLE t16 (id INT, v INT, PRIMARY KEY USING BTREE (id DESC, v))",
        "create table t17(a int)engine=innodb default charset latin1",
        "CREATE TABLE t18 (a VARCHAR(10) CHARACTER SET latin1 COLLATE latin1_german1_ci DEFAULT 'ä',"
        " b DECIMAL(65,30) DEFAULT 1.5, c DOUBLE DEFAULT -1e-5, d VARBINARY(4) DEFAULT 0x0102,"
        " e BIT(4) DEFAULT b'1010', f CHAR(2) DEFAULT _utf8mb4'ok', g VARCHAR(4) DEFAULT N'ñu',"
        " h INT UNSIGNED DEFAULT '42', i FLOAT DEFAULT 3.14159, j DATE DEFAULT '2024-02-29',"
        " k ENUM('x','y') NOT NULL DEFAULT 'y', l SET('p','q','r') DEFAULT 'r,p', m TIME(2) DEFAULT '-12:30:00.25',"
        " n YEAR DEFAULT 1999, o DATETIME(6) DEFAULT '2000-01-01 00:00:00.000001', p TINYINT DEFAULT TRUE)",
        "CREATE TABLE t19 (a INT) DEFAULT COLLATE = latin1_bin",
        "CREATE TABLE t20 (a VARCHAR(3), b VARCHAR(3) CHARACTER SET utf8mb4, c VARCHAR(3) COLLATE utf8mb4_bin)"
        " CHARACTER SET = utf8mb4 COLLATE = utf8mb4_unicode_ci",
        "CREATE TABLE t21 (a INT AUTO_INCREMENT UNIQUE, b INT)",
        "CREATE TABLE t21b (c INT SERIAL DEFAULT VALUE, d BIGINT)",
        "CREATE TABLE `ddl_create`.`t22` (`select` INT, `from` VARCHAR(2));",
        "DROP TABLE t4, t5, t22",
    ),
    database_defaults=False,
)

DROPS_AND_RENAMES = Scenario(
    "drops",
    (
        "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE b (id INT PRIMARY KEY, w VARCHAR(3))",
        "CREATE TABLE c (id INT PRIMARY KEY)",
        "INSERT INTO a VALUES (1, 10), (2, 20)",
        "INSERT INTO b VALUES (1, 'x'), (3, 'z')",
        "INSERT INTO c VALUES (7)",
        "RENAME TABLE a TO tmp, b TO a, tmp TO b",
        "RENAME TABLE c TO ddl_drops_b.c2",
        "RENAME TABLES ddl_drops_b.c2 TO c3",
        "ALTER TABLE c3 RENAME TO ddl_drops_b.c4",
        "ALTER TABLE ddl_drops_b.c4 RENAME AS c5, ADD COLUMN z INT DEFAULT 3",
        "ALTER TABLE c5 ADD COLUMN y INT, RENAME c6",
        "RENAME TABLE a TO a1, a1 TO a2, a2 TO a",
        "DROP TABLE a, b",
        "DROP TABLE IF EXISTS c6, nothere",
        "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
        "INSERT INTO a VALUES (5, 50)",
        "CREATE TEMPORARY TABLE tt (x INT)",
        "DROP TABLE tt, a",
        "CREATE TABLE a (id INT PRIMARY KEY, v INT)",
        "INSERT INTO a VALUES (6, 60)",
        "/* app:billing */ TRUNCATE TABLE a",
        "INSERT INTO a VALUES (7, 70)",
        "TRUNCATE a",
        "CREATE TABLE ddl_drops_b.x (id INT)",
        "CREATE TABLE ddl_drops_b.y (id INT)",
        "DROP TABLE `ddl_drops_b`.x, ddl_drops_b.`y`, a",
        "CREATE TABLE ddl_drops_b.z (id INT)",
        "DROP DATABASE ddl_drops_b",
        "DROP TABLE IF EXISTS a",
    ),
    second_database=True,
)

COLUMN_IDENTITY = Scenario(
    "identity",
    (
        "CREATE TABLE t (id INT PRIMARY KEY, f1 VARCHAR(10), f2 VARCHAR(10), c INT)",
        "INSERT INTO t VALUES (1, 'one', 'uno', 10), (2, 'two', 'dos', 20), (3, NULL, '', NULL)",
        "ALTER TABLE t CHANGE f1 tmp VARCHAR(10)",
        "ALTER TABLE t CHANGE f2 f1 VARCHAR(10)",
        "ALTER TABLE t CHANGE tmp f2 VARCHAR(10)",
        "ALTER TABLE t CHANGE f1 f2 VARCHAR(10), CHANGE f2 f1 VARCHAR(10)",
        "ALTER TABLE t RENAME COLUMN f1 TO f2, RENAME COLUMN f2 TO f1",
        "ALTER TABLE t DROP COLUMN c",
        "ALTER TABLE t ADD COLUMN c INT",
        "UPDATE t SET c = id * 100",
        "ALTER TABLE t DROP COLUMN c, ADD COLUMN c INT NOT NULL DEFAULT 5 FIRST",
        "ALTER TABLE t RENAME COLUMN c TO C",
        "ALTER TABLE t MODIFY C INT NOT NULL DEFAULT 5 AFTER f2",
        "ALTER TABLE t CHANGE C d INT FIRST, MODIFY f1 VARCHAR(10) AFTER id",
        "ALTER TABLE t ADD COLUMN e INT AFTER d, ADD COLUMN g INT DEFAULT 9 AFTER e",
        "ALTER TABLE t ADD COLUMN (h INT, i VARCHAR(3) DEFAULT 'i')",
        "ALTER TABLE t DROP COLUMN h, DROP i",
        "ALTER TABLE t MODIFY f1 VARCHAR(10) FIRST",
        "ALTER TABLE t CHANGE `f2` `we ird``name` VARCHAR(10)",
        "ALTER TABLE t ADD COLUMN `x.y` INT DEFAULT -1, ADD `ü` CHAR(1) DEFAULT 'ü'",
        "ALTER TABLE t DROP COLUMN `we ird``name`",
        "ALTER TABLE t MODIFY d INT NOT NULL DEFAULT 5 AFTER g, MODIFY g INT DEFAULT 9 FIRST",
        "ALTER TABLE t CHANGE e e2 INT AFTER `x.y`, ADD COLUMN e INT DEFAULT 4 AFTER e2",
        "ALTER TABLE t RENAME COLUMN e TO e3, CHANGE e2 e BIGINT",
        "ALTER TABLE t RENAME COLUMN e3 TO e, RENAME COLUMN e TO e3",
        "ALTER TABLE t CHANGE id id INT, CHANGE f1 F1 VARCHAR(10)",
    ),
    database_defaults=False,
)

KEYS = Scenario(
    "keys",
    (
        "CREATE TABLE k (a INT NOT NULL, b INT NOT NULL, c INT, PRIMARY KEY (a, b))",
        "INSERT INTO k VALUES (1, 1, 10), (1, 2, 20), (2, 3, 30)",
        "ALTER TABLE k DROP COLUMN a",
        "ALTER TABLE k DROP PRIMARY KEY",
        "ALTER TABLE k ADD PRIMARY KEY (c)",
        "ALTER TABLE k CHANGE c cc BIGINT",
        "ALTER TABLE k DROP PRIMARY KEY, ADD CONSTRAINT pk PRIMARY KEY (b, cc)",
        "ALTER TABLE k ADD COLUMN id INT NOT NULL AUTO_INCREMENT UNIQUE FIRST",
        "DROP INDEX `PRIMARY` ON k",
        "ALTER TABLE k ADD PRIMARY KEY USING BTREE (id)",
        "CREATE INDEX ix ON k (b)",
        "CREATE UNIQUE INDEX ux USING BTREE ON k (cc) ALGORITHM=INPLACE LOCK=NONE",
        "DROP INDEX ix ON k",
        "ALTER TABLE k RENAME INDEX ux TO ux2",
        "ALTER TABLE k ALTER INDEX ux2 INVISIBLE",
        "ALTER TABLE k ADD CONSTRAINT chk CHECK (b >= 0)",
        "ALTER TABLE k ALTER CHECK chk NOT ENFORCED",
        "ALTER TABLE k DROP CHECK chk",
        "ALTER TABLE k MODIFY id BIGINT NOT NULL AUTO_INCREMENT",
        "CREATE TABLE k2 (x INT)",
        "INSERT INTO k2 VALUES (1), (2)",
        "ALTER TABLE k2 ADD COLUMN y INT AUTO_INCREMENT PRIMARY KEY",
        "ALTER TABLE k2 DROP PRIMARY KEY, CHANGE y y INT NOT NULL, ADD PRIMARY KEY (x, y)",
        "ALTER TABLE k2 RENAME COLUMN x TO z",
        "ALTER TABLE k2 MODIFY z BIGINT NOT NULL, ADD CONSTRAINT fk FOREIGN KEY (z) REFERENCES k (id)",
        "ALTER TABLE k2 DROP FOREIGN KEY fk, ADD UNIQUE KEY uz (y)",
        "ALTER TABLE k2 DROP KEY uz, ADD INDEX fx ((z + 1))",
        "ALTER TABLE k2 DROP INDEX fx, DROP PRIMARY KEY, ADD PRIMARY KEY (y)",
        "CREATE TABLE k3 (a VARCHAR(20) NOT NULL, b INT, PRIMARY KEY (a(4)))",
        "ALTER TABLE k3 MODIFY a VARCHAR(30) NOT NULL",
    ),
)

_BACKFILL_COLUMNS = (
    # no DEFAULT, nullable / NOT NULL, per type family
    "n1 INT",
    "n2 TINYINT NOT NULL",
    "n3 INT UNSIGNED NOT NULL",
    "n4 BIGINT NOT NULL",
    "n5 DECIMAL(5,2) NOT NULL",
    "n6 FLOAT NOT NULL",
    "n7 DOUBLE NOT NULL",
    "n8 BIT(1) NOT NULL",
    "n9 BIT(12) NOT NULL",
    "n10 CHAR(3) NOT NULL",
    "n11 VARCHAR(5) NOT NULL",
    "n12 BINARY(3) NOT NULL",
    "n13 VARBINARY(3) NOT NULL",
    "n14 TEXT NOT NULL",
    "n15 BLOB NOT NULL",
    "n16 ENUM('x','y') NOT NULL",
    "n17 SET('x','y') NOT NULL",
    "n18 JSON NOT NULL",
    "n20 TIME NOT NULL",
    "n21 YEAR NOT NULL",
    "n22 TIME(3) NOT NULL",
    "n24 DECIMAL(40,5) NOT NULL",
    "n25 MEDIUMINT UNSIGNED NOT NULL",
    "n26 ENUM('only') NOT NULL",
    # constants
    "d1 INT DEFAULT 7",
    "d2 INT DEFAULT -5",
    "d3 INT DEFAULT +5",
    "d4 INT DEFAULT - 5",
    "d5 INT DEFAULT 1.5",
    "d6 INT DEFAULT -2.5",
    "d7 INT DEFAULT 0x10",
    "d8 INT DEFAULT b'101'",
    "d9 INT DEFAULT TRUE",
    "d10 INT DEFAULT '42'",
    "d11 DECIMAL(5,2) DEFAULT 1.005",
    "d12 DECIMAL(5,2) DEFAULT -1.005",
    "d13 DECIMAL(5,2) DEFAULT '1.004'",
    "d14 DECIMAL(5,2) DEFAULT 1e2",
    "d15 DECIMAL(4,1) DEFAULT .5",
    "d16 DECIMAL(5,2) DEFAULT -0.001",
    "d17 FLOAT DEFAULT 1.1",
    "d18 FLOAT DEFAULT '0.3'",
    "d19 DOUBLE DEFAULT 1.1",
    "d20 DOUBLE DEFAULT 1e308",
    "d21 FLOAT DEFAULT 16777217",
    "d22 FLOAT DEFAULT 3.4e38",
    "d23 DOUBLE DEFAULT -0.0",
    "d24 CHAR(5) DEFAULT 'ab  '",
    "d25 VARCHAR(5) DEFAULT 'ab  '",
    "d26 VARCHAR(3) DEFAULT 'ab   '",
    "d27 VARCHAR(5) DEFAULT _latin1'x'",
    "d28 VARCHAR(5) DEFAULT N'ñ'",
    "d29 VARCHAR(5) DEFAULT X'41'",
    "d30 VARCHAR(5) DEFAULT 0x4142",
    "d31 VARCHAR(5) DEFAULT 5",
    "d32 VARCHAR(5) DEFAULT 1.50",
    "d33 VARCHAR(5) DEFAULT -0",
    "d34 VARCHAR(5) DEFAULT -0.0",
    "d35 VARCHAR(8) DEFAULT .5",
    "d36 VARCHAR(5) DEFAULT TRUE",
    "d37 VARCHAR(5) CHARACTER SET latin1 DEFAULT 'ñé'",
    "d38 VARCHAR(8) DEFAULT 'a\\\\nb'",
    "d39 VARCHAR(8) DEFAULT 'it''s'",
    "d40 VARCHAR(8) DEFAULT 'a' 'b' \"c\"",
    "d41 VARCHAR(8) DEFAULT 'tab\\there'",
    "d42 BINARY(3) DEFAULT 'a'",
    "d43 VARBINARY(3) DEFAULT 'a'",
    "d44 BINARY(4) DEFAULT 0x0001",
    "d44b VARBINARY(4) DEFAULT 0x4100",
    "d45 ENUM('a','b') DEFAULT 'b'",
    "d46 SET('a','b','c') DEFAULT 'c,a'",
    "d47 SET('a','b') DEFAULT 'a,a'",
    "d48 SET('a','b') DEFAULT ''",
    "d49 DATE DEFAULT '2024-02-03'",
    "d50 DATETIME DEFAULT '2024-02-03 10:11:12'",
    "d51 DATETIME DEFAULT '2024-02-03'",
    "d52 DATETIME(3) DEFAULT '2024-02-03 10:11:12.123'",
    "d53 TIME DEFAULT '10:11'",
    "d54 TIME DEFAULT '-838:59:59'",
    "d55 TIME(1) DEFAULT '00:00:00.5'",
    "d56 YEAR DEFAULT '24'",
    "d57 YEAR DEFAULT 24",
    "d58 YEAR DEFAULT 0",
    "d59 YEAR DEFAULT '0'",
    "d60 YEAR DEFAULT 2155",
    "d61 BIT(1) DEFAULT 1",
    "d62 BIT(4) DEFAULT b'101'",
    "d63 BIT(12) DEFAULT b'101000000001'",
    "d64 BIT(1) DEFAULT TRUE",
    "d65 TIMESTAMP NULL DEFAULT '2024-02-03 10:11:12'",
    "d66 INT NULL DEFAULT NULL",
    "d67 INT UNSIGNED DEFAULT 4294967295",
    "d68 BIGINT DEFAULT -9223372036854775808",
    "d69 BIGINT UNSIGNED DEFAULT 18446744073709551615",
    "d70 DECIMAL(65,30) DEFAULT -12345678901234567890.123456789",
    "d71 TINYINT UNSIGNED DEFAULT 255",
    "d72 DOUBLE DEFAULT 2.2250738585072014e-308",
    "d73 FLOAT DEFAULT 1.17549435e-38",
    "d74 VARCHAR(10) DEFAULT 'ß😀'",
    "d75 CHAR(3) CHARACTER SET ascii DEFAULT 'a'",
    # expressions and the statement's time
    "e1 INT DEFAULT (1 + 1)",
    "e2 INT DEFAULT (id * 2)",
    "e3 TEXT DEFAULT ('abc')",
    "e4 JSON DEFAULT ('[1,  2]')",
    "e5 VARCHAR(5) DEFAULT (_utf8mb4'x')",
    "e6 INT DEFAULT (5)",
    "e7 DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6)",
    "e8 TIMESTAMP DEFAULT CURRENT_TIMESTAMP",
    "e9 DATE DEFAULT (CURRENT_DATE)",
    "e10 BLOB DEFAULT (0x00FF)",
    "e11 VARCHAR(10) DEFAULT ('q' )",
    # generated, invisible, positions
    "g1 INT AS (id + 1) VIRTUAL",
    "g2 INT AS (id * 3) STORED",
    "g3 VARCHAR(20) GENERATED ALWAYS AS (CONCAT('r', id))",
    "v1 VARCHAR(5) INVISIBLE DEFAULT 'q'",
    "p1 INT DEFAULT 8 FIRST",
    "p2 INT DEFAULT 9 AFTER id",
)

BACKFILL = Scenario(
    "backfill",
    (
        "CREATE TABLE t (id INT PRIMARY KEY)",
        "INSERT INTO t VALUES (1), (2), (3)",
        *(f"ALTER TABLE t ADD COLUMN {column}" for column in _BACKFILL_COLUMNS),
        "ALTER TABLE t ADD COLUMN m1 INT DEFAULT 1, ADD COLUMN m2 VARCHAR(2) NOT NULL, ADD m3 DATE NULL",
        "ALTER TABLE t ADD COLUMN c1 VARCHAR(4) DEFAULT 'abc', CHARACTER SET latin1, ADD c2 CHAR(2) DEFAULT 'é'",
    ),
)

BACKFILL_NON_STRICT = Scenario(
    "backfill_lax",
    (
        "CREATE TABLE t (id INT PRIMARY KEY)",
        "INSERT INTO t VALUES (1), (2)",
        "ALTER TABLE t ADD COLUMN a DATE NOT NULL",
        "ALTER TABLE t ADD COLUMN b DATETIME NOT NULL",
        "ALTER TABLE t ADD COLUMN c DATETIME(3) NOT NULL",
        "ALTER TABLE t ADD COLUMN d DATE DEFAULT '0000-00-00'",
        "ALTER TABLE t ADD COLUMN e DECIMAL(5,2) DEFAULT 'abc'",
        "ALTER TABLE t ADD COLUMN f DATETIME DEFAULT '2024-02-03 10:11:12.5'",
        "ALTER TABLE t ADD COLUMN g TIME DEFAULT '10:11:12.5'",
        "ALTER TABLE t ADD COLUMN h DATETIME(1) DEFAULT '2024-12-31 23:59:59.96'",
        "SET SESSION sql_mode = 'TIME_TRUNCATE_FRACTIONAL'",
        "ALTER TABLE t ADD COLUMN i DATETIME DEFAULT '2024-02-03 10:11:12.9'",
        "ALTER TABLE t ADD COLUMN j TIME(2) DEFAULT '01:02:03.456'",
        "ALTER TABLE t ADD COLUMN k INT NOT NULL",
        "ALTER TABLE t ADD COLUMN l TIMESTAMP NOT NULL, ADD COLUMN m TIMESTAMP(2) NOT NULL",
    ),
    sql_mode="",
)

_RETYPE_TABLE = (
    "CREATE TABLE r (id INT PRIMARY KEY, i8 TINYINT, u8 TINYINT UNSIGNED, i32 INT, u32 INT UNSIGNED, m24 MEDIUMINT"
    " UNSIGNED, d DECIMAL(7,2), d2 DECIMAL(38,4), f FLOAT, db DOUBLE, c CHAR(4), v VARCHAR(6), t TINYTEXT,"
    " v3 VARCHAR(5) CHARACTER SET utf8mb3, va VARCHAR(5) CHARACTER SET ascii, b BINARY(3), vb VARBINARY(4),"
    " e ENUM('a','b','c'), s SET('x','y','z'), dt DATETIME, dt3 DATETIME(3), tm TIME, ts TIMESTAMP NULL,"
    " bt BIT(5), y YEAR, j JSON, nn INT NOT NULL, du DECIMAL(5,2) UNSIGNED, fu FLOAT UNSIGNED)"
)
_RETYPE_ROWS = (
    "INSERT INTO r VALUES (1, -128, 255, -2147483648, 4294967295, 16777215, -99999.99, 1234567890123456789012345678"
    "9012.3456, 1.1, 1.7976931348623157e308, 'ab', 'ab  ', 'x', 'ñ€', 'az', 'a', 0x00ff, 'c', 'x,z',"
    " '2024-01-01 10:00:00', '2024-12-31 23:59:59.999', '-838:59:59', '2038-01-19 03:14:07', b'10101', 2155,"
    ' \'{"b": 1, "a": [1, 2]}\', 0, 999.99, 3.4e38)',
    "INSERT INTO r (id, i8, u8, i32, u32, m24, d, d2, f, db, c, v, t, e, s, nn) VALUES"
    " (2, 127, 0, 2147483647, 0, 0, 99999.99, -0.0001, -1.17549435e-38, -2.2250738585072014e-308, '', '', '',"
    " 'a', '', 1)",
    "INSERT INTO r (id, nn) VALUES (3, 2)",
)

RETYPES = Scenario(
    "retype",
    (
        _RETYPE_TABLE,
        *_RETYPE_ROWS,
        # widening (values preserved)
        "ALTER TABLE r MODIFY i8 SMALLINT, MODIFY u8 SMALLINT UNSIGNED, MODIFY i32 BIGINT, MODIFY u32 BIGINT",
        "ALTER TABLE r MODIFY m24 INT UNSIGNED, MODIFY u8 INT",
        "ALTER TABLE r MODIFY d DECIMAL(9,2), MODIFY d2 DECIMAL(38,4)",
        "ALTER TABLE r MODIFY f DOUBLE",
        "ALTER TABLE r MODIFY c CHAR(8), MODIFY v VARCHAR(10)",
        "ALTER TABLE r MODIFY c VARCHAR(8), MODIFY t TEXT",
        "ALTER TABLE r MODIFY v3 VARCHAR(5) CHARACTER SET utf8mb4, MODIFY va VARCHAR(6) CHARACTER SET latin1",
        "ALTER TABLE r MODIFY b VARBINARY(5), MODIFY vb BLOB",
        "ALTER TABLE r MODIFY e ENUM('a','b','c','d'), MODIFY s SET('x','y','z','w')",
        "ALTER TABLE r MODIFY e ENUM('d','c','b','a','q')",
        "ALTER TABLE r MODIFY s SET('p','x','y','q','z','w')",
        "ALTER TABLE r MODIFY dt DATETIME(6), MODIFY dt3 DATETIME(4), MODIFY tm TIME(2), MODIFY ts TIMESTAMP(1) NULL",
        "ALTER TABLE r MODIFY bt BIT(8)",
        "ALTER TABLE r MODIFY nn INT NULL",
        "ALTER TABLE r MODIFY v VARCHAR(10) COLLATE utf8mb4_bin",
        "ALTER TABLE r MODIFY du DECIMAL(5,2), MODIFY fu FLOAT",
        "ALTER TABLE r MODIFY j JSON COMMENT 'j'",
        "ALTER TABLE r MODIFY i32 BIGINT DEFAULT 5, ALTER COLUMN y SET DEFAULT 2000",
        "ALTER TABLE r MODIFY u8 INT UNSIGNED",
        # conversions that change values or types (succeed in strict mode)
        "ALTER TABLE r MODIFY d DECIMAL(9,1)",
        "ALTER TABLE r MODIFY dt3 DATETIME(1)",
        "ALTER TABLE r MODIFY f FLOAT",
        "ALTER TABLE r MODIFY c CHAR(8)",
        "ALTER TABLE r MODIFY e ENUM('D','C','B','A','Q')",
        "ALTER TABLE r MODIFY s SET('z','y','x','p','q','w')",
        "ALTER TABLE r MODIFY i8 VARCHAR(8)",
        "ALTER TABLE r MODIFY bt BIT(16)",
        "ALTER TABLE r MODIFY dt TIMESTAMP(6) NULL",
        "ALTER TABLE r MODIFY y SMALLINT",
        "ALTER TABLE r MODIFY j TEXT",
        "ALTER TABLE r MODIFY v3 VARCHAR(5) CHARACTER SET utf16",
        "ALTER TABLE r MODIFY nn BIGINT NOT NULL",
        "ALTER TABLE r MODIFY id BIGINT",
        "ALTER TABLE r MODIFY m24 BIGINT",
        "ALTER TABLE r CHANGE i32 big DECIMAL(30,0)",
    ),
)

RETYPES_NON_STRICT = Scenario(
    "retype_lax",
    (
        _RETYPE_TABLE,
        *_RETYPE_ROWS,
        "ALTER TABLE r MODIFY v VARCHAR(3)",
        "ALTER TABLE r MODIFY i32 TINYINT",
        "ALTER TABLE r MODIFY u32 INT",
        "ALTER TABLE r MODIFY i8 TINYINT UNSIGNED",
        "ALTER TABLE r MODIFY d DECIMAL(5,2)",
        "ALTER TABLE r MODIFY db FLOAT",
        "ALTER TABLE r MODIFY e ENUM('a','b')",
        "ALTER TABLE r MODIFY s SET('x','y')",
        "ALTER TABLE r MODIFY v3 VARCHAR(5) CHARACTER SET latin1",
        "ALTER TABLE r MODIFY c INT NOT NULL",
        "ALTER TABLE r MODIFY tm TIME NOT NULL",
        "ALTER TABLE r MODIFY bt BIT(2)",
        "ALTER TABLE r MODIFY dt3 DATE",
        "ALTER TABLE r MODIFY du DECIMAL(5,2) UNSIGNED",
        "ALTER TABLE r MODIFY j VARCHAR(4)",
    ),
    sql_mode="",
)

CHARSETS = Scenario(
    "charsets",
    (
        "CREATE TABLE c (id INT PRIMARY KEY, a VARCHAR(5), b TEXT, e ENUM('a','b'), t TINYTEXT, m MEDIUMTEXT,"
        " x VARCHAR(4) CHARACTER SET latin1, bn VARBINARY(3)) DEFAULT CHARSET=latin1",
        "INSERT INTO c VALUES (1, 'ñé', 'text', 'b', 'tiny', 'medium', 'ß', 'x'), (2, NULL, NULL, NULL, NULL, NULL,"
        " NULL, NULL), (3, _latin1 X'80819D8DFF', _latin1 X'80819D', 'a', _latin1 X'8F90', _latin1 X'FF',"
        " _latin1 X'A4', 0x00)",
        "ALTER TABLE c MODIFY a VARCHAR(6) CHARACTER SET utf8mb4, MODIFY t TINYTEXT CHARACTER SET utf8mb4",
        "ALTER TABLE c MODIFY a VARCHAR(6) CHARACTER SET latin1, MODIFY m LONGTEXT CHARACTER SET utf8mb4",
        "ALTER TABLE c DEFAULT CHARSET=utf8mb4",
        "ALTER TABLE c ADD COLUMN n VARCHAR(3) DEFAULT 'ñ'",
        "ALTER TABLE c CHARACTER SET latin1 COLLATE latin1_bin, ADD COLUMN o VARCHAR(3)",
        "ALTER TABLE c COLLATE utf8mb4_unicode_ci",
        "ALTER TABLE c ADD COLUMN p CHAR(2) BINARY, ADD q VARCHAR(2) CHARACTER SET latin1 BINARY",
        "ALTER TABLE c MODIFY a VARCHAR(5) COLLATE latin1_general_cs",
        "ALTER TABLE c CONVERT TO CHARACTER SET utf8mb4",
        "ALTER TABLE c MODIFY x VARCHAR(4)",
        "ALTER TABLE c CONVERT TO CHARACTER SET utf8mb3 COLLATE utf8mb3_bin",
        "ALTER TABLE c CONVERT TO CHARSET utf8mb4, ADD COLUMN r VARCHAR(2)",
        "ALTER TABLE c CONVERT TO CHARACTER SET latin1, MODIFY a VARCHAR(6) CHARACTER SET utf8mb4",
        "ALTER TABLE c MODIFY e ENUM('a','b','é') CHARACTER SET utf8mb4",
        "ALTER TABLE c MODIFY b TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        "CREATE TABLE d (a VARCHAR(3), b TEXT(100), c VARCHAR(3) BINARY) CHARSET latin1",
        "ALTER TABLE d ADD COLUMN e TEXT(100), CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin",
        "CREATE TABLE e (a VARCHAR(3)) COLLATE utf8mb4_bin",
        "ALTER TABLE e ADD COLUMN b VARCHAR(3) CHARACTER SET utf8mb4",
    ),
)

GENERATED_AND_DEFAULTS = Scenario(
    "generated",
    (
        "CREATE TABLE g (id INT PRIMARY KEY, a INT, s VARCHAR(10))",
        "INSERT INTO g VALUES (1, 10, 'x'), (2, NULL, 'y')",
        "ALTER TABLE g ADD COLUMN v INT AS (a + 1) VIRTUAL, ADD COLUMN w INT AS (a * 2) STORED",
        "ALTER TABLE g MODIFY v INT AS (a + 2) VIRTUAL",
        "ALTER TABLE g MODIFY w BIGINT AS (a * 2) STORED",
        "ALTER TABLE g DROP COLUMN v",
        "ALTER TABLE g ALTER COLUMN a SET DEFAULT 7",
        "ALTER TABLE g ALTER a DROP DEFAULT",
        "ALTER TABLE g ALTER COLUMN s SET DEFAULT ('z')",
        "ALTER TABLE g ALTER COLUMN s SET INVISIBLE",
        "ALTER TABLE g ALTER COLUMN s SET VISIBLE, ALTER COLUMN a SET DEFAULT -1",
        "ALTER TABLE g ADD COLUMN h VARCHAR(3) INVISIBLE DEFAULT 'h' AFTER id",
        "ALTER TABLE g MODIFY h VARCHAR(3) VISIBLE DEFAULT 'h'",
        "ALTER TABLE g MODIFY s VARCHAR(10) COMMENT 'the s' DEFAULT 'd'",
        "ALTER TABLE g ADD COLUMN ts TIMESTAMP(3) NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)",
        "ALTER TABLE g MODIFY ts TIMESTAMP(3) NULL DEFAULT NULL",
        "ALTER TABLE g ADD COLUMN dt DATETIME DEFAULT NOW() ON UPDATE NOW()",
        "ALTER TABLE g ADD COLUMN lt DATETIME DEFAULT LOCALTIME, ADD COLUMN lts DATETIME DEFAULT LOCALTIMESTAMP()",
        "ALTER TABLE g ADD COLUMN sr POINT SRID 0 DEFAULT (POINT(0, 0))",
        "ALTER TABLE g ADD COLUMN js JSON NOT NULL DEFAULT (JSON_ARRAY())",
        "ALTER TABLE g ADD COLUMN jj JSON DEFAULT (JSON_OBJECT('k', 1)) INVISIBLE",
    ),
)

OPTIONS_AND_SYNTAX = Scenario(
    "options",
    (
        "CREATE TABLE o (id INT PRIMARY KEY, a INT)",
        "INSERT INTO o VALUES (1, 1), (2, 2), (15, 3)",
        "ALTER TABLE o ENGINE=InnoDB",
        "ALTER TABLE o COMMENT 'hello', AUTO_INCREMENT=100, ROW_FORMAT=COMPACT",
        "ALTER TABLE o ENGINE = InnoDB COMMENT = 'x' STATS_PERSISTENT = 0",
        "ALTER TABLE o FORCE",
        "ALTER TABLE o ADD COLUMN b INT, ALGORITHM=INSTANT",
        "ALTER TABLE o ADD COLUMN c INT DEFAULT 3, ALGORITHM=COPY, LOCK=SHARED",
        "ALTER TABLE o ALGORITHM=INPLACE, LOCK=NONE, ADD INDEX ia (a)",
        "ALTER TABLE o ORDER BY a",
        "ALTER TABLE o",
        "alter table o add column `lower` int default 1, drop column c",
        "ALTER /* c1 */ TABLE /* c2 */ o /* c3 */ ADD /* c4 */ COLUMN /* c5 */ d /* c6 */ INT # c7\n DEFAULT 4",
        "ALTER TABLE o ADD COLUMN e INT -- a comment\n DEFAULT 5;",
        "/*!80000 ALTER TABLE o ADD COLUMN f INT DEFAULT 6 */",
        "ALTER TABLE o /*!99999 ADD COLUMN never INT, */ ADD COLUMN g INT DEFAULT 7",
        "ALTER TABLE `ddl_options` . `o` ADD COLUMN `h` INT DEFAULT 8",
        "ALTER TABLE o PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10),"
        " PARTITION p1 VALUES LESS THAN (20), PARTITION p2 VALUES LESS THAN MAXVALUE)",
        "ALTER TABLE o ANALYZE PARTITION p0, p1",
        "CREATE TABLE oe LIKE o",
        "ALTER TABLE oe REMOVE PARTITIONING",
        "INSERT INTO oe (id, a) VALUES (5, 55)",
        "ALTER TABLE o EXCHANGE PARTITION p0 WITH TABLE oe WITHOUT VALIDATION",
        "DROP TABLE oe",
        "ALTER TABLE o TRUNCATE PARTITION p0",
        "ALTER TABLE o REORGANIZE PARTITION p2 INTO (PARTITION p2 VALUES LESS THAN (30),"
        " PARTITION p3 VALUES LESS THAN MAXVALUE)",
        "ALTER TABLE o DROP PARTITION p3",
        "ALTER TABLE o REMOVE PARTITIONING",
        "CREATE TABLE ox (id INT PRIMARY KEY, a INT, b INT, d INT, e INT, f INT, g INT, h INT, `lower` INT)",
        "ALTER TABLE o PARTITION BY HASH (id) PARTITIONS 2",
        "ALTER TABLE o COALESCE PARTITION 1",
        "ALTER TABLE o REMOVE PARTITIONING",
        "ALTER TABLE o WITHOUT VALIDATION, ADD COLUMN i INT",
        "ALTER TABLE o ENGINE=MyISAM",
        "ALTER TABLE o ENGINE=InnoDB, KEY_BLOCK_SIZE=0",
        "OPTIMIZE TABLE o",
        "ANALYZE TABLE o",
        "CREATE VIEW ov AS SELECT id FROM o",
        "CREATE OR REPLACE ALGORITHM=MERGE SQL SECURITY INVOKER VIEW ov AS SELECT id, a FROM o",
        "ALTER VIEW ov AS SELECT a FROM o",
        "DROP VIEW ov",
        "CREATE TRIGGER otr BEFORE INSERT ON o FOR EACH ROW SET NEW.a = 1",
        "DROP TRIGGER otr",
        "CREATE PROCEDURE op() BEGIN SELECT 1; END",
        "DROP PROCEDURE op",
        "CREATE FUNCTION of1() RETURNS INT DETERMINISTIC RETURN 1",
        "DROP FUNCTION of1",
    ),
)

ANSI_QUOTES = Scenario(
    "ansi",
    (
        'CREATE TABLE "q" ("id" INT PRIMARY KEY, "a b" VARCHAR(8) DEFAULT \'a\\b\', c INT)',
        'INSERT INTO "q" VALUES (1, DEFAULT, 1)',
        'ALTER TABLE "q" ADD COLUMN "d""e" VARCHAR(8) DEFAULT \'x\\n\'',
        'ALTER TABLE q CHANGE "a b" "ab" VARCHAR(8) DEFAULT \'a\\b\'',
        'RENAME TABLE "q" TO "q2"',
        'DROP TABLE "q2"',
    ),
    sql_mode="ANSI_QUOTES,NO_BACKSLASH_ESCAPES",
)

REAL_AS_FLOAT = Scenario(
    "realf",
    ("CREATE TABLE r (a REAL, b REAL(7,2), c DOUBLE)", "ALTER TABLE r ADD COLUMN d REAL DEFAULT 1.1"),
    sql_mode="REAL_AS_FLOAT",
)

SCENARIOS: tuple[Scenario, ...] = (
    CREATE_FORMS,
    DROPS_AND_RENAMES,
    COLUMN_IDENTITY,
    KEYS,
    BACKFILL,
    BACKFILL_NON_STRICT,
    RETYPES,
    RETYPES_NON_STRICT,
    CHARSETS,
    GENERATED_AND_DEFAULTS,
    OPTIONS_AND_SYNTAX,
    ANSI_QUOTES,
    REAL_AS_FLOAT,
)
