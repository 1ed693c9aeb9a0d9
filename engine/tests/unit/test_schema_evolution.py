"""DDL text to column changes, and column changes to lake changes: what is applied, what stops."""

from __future__ import annotations

import pytest

from lakehouse_engine.cdc.evolution import Evolution, keeps_values, plan
from lakehouse_engine.cdc.schemachanges import LAKE_COLUMNS
from lakehouse_engine.source import ddl
from lakehouse_engine.source.ddl import AddColumn, DropColumn, ModifyColumn, RenameColumn
from lakehouse_engine.source.introspect import ColumnInfo, TableSchema
from lakehouse_engine.state.checkpoint import Checkpoint, Phase
from lakehouse_engine.state.lakechange import Kind, LakeChange
from lakehouse_engine.state.positions import BinlogPosition


def col(name: str, column_type: str, nullable: bool = True, **extra) -> ColumnInfo:
    data_type = column_type.split("(")[0].split()[0]
    return ColumnInfo(name, data_type, column_type, nullable, **extra)


BEFORE = TableSchema("demo", "t", (
    col("id", "int(11)", False),
    col("name", "varchar(20)"),
    col("n", "int(11)"),
    col("amount", "decimal(10,2)", precision=10, scale=2),
    col("kind", "enum('a','b')"),
), ("id",))


def now(*changed: ColumnInfo, drop: tuple[str, ...] = ()) -> TableSchema:
    by_name = {c.name: c for c in BEFORE.columns if c.name not in drop}
    by_name.update({c.name: c for c in changed})
    return TableSchema("demo", "t", tuple(by_name.values()), ("id",))


def planned(sql: str, current: TableSchema) -> Evolution:
    outcome = plan(BEFORE, ddl.parse(sql), current, LAKE_COLUMNS)
    assert isinstance(outcome, Evolution), outcome
    return outcome


def refused(sql: str, current: TableSchema) -> str:
    outcome = plan(BEFORE, ddl.parse(sql), current, LAKE_COLUMNS)
    assert isinstance(outcome, str), outcome
    return outcome


# -- the parser -----------------------------------------------------------------------------


def test_each_alter_item_is_read_in_order_and_items_without_column_changes_are_skipped():
    parsed = ddl.parse("/* by tool */ ALTER ONLINE TABLE `demo`.`t` WAIT 5 ADD COLUMN `a b` INT DEFAULT -5 AFTER n, "
                       "ADD INDEX ix (name), DROP COLUMN kind, RENAME COLUMN name TO title, "
                       "CHANGE COLUMN n m BIGINT NOT NULL, MODIFY amount DECIMAL(12,3), ALGORITHM=INSTANT, "
                       "ALTER COLUMN m SET DEFAULT 3")
    assert parsed.unsupported is None
    add, drop, rename, change, modify = parsed.changes
    assert isinstance(add, AddColumn) and add.name == "a b" and add.definition.default is not None
    assert add.definition.default.value == "-5" and add.definition.type_name == "int"
    assert drop == DropColumn("kind") and rename == RenameColumn("name", "title")
    assert isinstance(change, ModifyColumn) and (change.old, change.new) == ("n", "m")
    assert change.definition.type_name == "bigint" and not change.definition.nullable
    assert isinstance(modify, ModifyColumn) and modify.definition.arguments == ("12", "3")
    assert len(parsed.ignored) == 3


@pytest.mark.parametrize(("sql", "type_name", "arguments", "unsigned"), [
    ("ALTER TABLE t ADD c INTEGER UNSIGNED", "int", (), True),
    ("ALTER TABLE t ADD c BOOLEAN", "tinyint", ("1",), False),
    ("ALTER TABLE t ADD c NUMERIC(8, 2)", "decimal", ("8", "2"), False),
    ("ALTER TABLE t ADD c DOUBLE PRECISION", "double", (), False),
    ("ALTER TABLE t ADD c CHARACTER VARYING(30)", "varchar", ("30",), False),
    ("ALTER TABLE t ADD c FLOAT(30)", "double", (), False),
    ("ALTER TABLE t ADD c JSON", "longtext", (), False),
])
def test_type_synonyms_resolve_to_the_type_the_server_stores(sql, type_name, arguments, unsigned):
    (change,) = ddl.parse(sql).changes
    assert isinstance(change, AddColumn)
    definition = change.definition
    assert (definition.type_name, definition.arguments, definition.unsigned) == (type_name, arguments, unsigned)


@pytest.mark.parametrize(("sql", "value", "known"), [
    ("ALTER TABLE t ADD c VARCHAR(9) DEFAULT 'it''s'", "it's", True),
    ("ALTER TABLE t ADD c VARCHAR(9) DEFAULT 'a\\\\b'", "a\\b", True),
    ("ALTER TABLE t ADD c INT DEFAULT NULL", None, True),
    ("ALTER TABLE t ADD c DOUBLE DEFAULT 1.5e3", "1.5e3", True),
    ("ALTER TABLE t ADD c DATETIME DEFAULT CURRENT_TIMESTAMP", None, False),
    ("ALTER TABLE t ADD c INT DEFAULT (1 + 1)", None, False),
    ("ALTER TABLE t ADD c CHAR(36) DEFAULT uuid()", None, False),
])
def test_defaults_are_literals_or_marked_unknown(sql, value, known):
    (change,) = ddl.parse(sql).changes
    assert isinstance(change, AddColumn) and change.definition.default is not None
    assert (change.definition.default.value, change.definition.default.known) == (value, known)


@pytest.mark.parametrize(("sql", "reason"), [
    ("DROP TABLE t", "replaces or removes"),
    ("CREATE OR REPLACE TABLE t (id INT)", "replaces or removes"),
    ("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, n)", "primary key"),
    ("ALTER TABLE t TRUNCATE PARTITION p0", "partition"),
    ("ALTER TABLE t RENAME TO u", "renamed"),
    ("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4", "re-encodes"),
    ("ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT", "may or may not"),
    ("ALTER TABLE t DROP COLUMN IF EXISTS c", "may or may not"),
    ("ALTER TABLE t FROBNICATE", "cannot read"),
])
def test_statements_that_cannot_be_placed_exactly_say_why(sql, reason):
    parsed = ddl.parse(sql)
    assert parsed.unsupported is not None and reason in parsed.unsupported


def test_comments_are_never_read_as_part_of_the_statement():
    (change,) = ddl.parse("ALTER TABLE t ADD c INT /* NOT NULL later */ DEFAULT 5 -- was DEFAULT 0\n").changes
    assert isinstance(change, AddColumn) and change.definition.nullable
    assert change.definition.default is not None and change.definition.default.value == "5"
    (change,) = ddl.parse("ALTER TABLE t ADD c VARCHAR(4) DEFAULT 'a' 'b' # two literals are one\n").changes
    assert isinstance(change, AddColumn) and change.definition.default is not None
    assert change.definition.default.value == "ab"


def test_an_attribute_the_parser_does_not_know_makes_the_statement_unsupported():
    parsed = ddl.parse("ALTER TABLE t ADD c INT FROBNICATED DEFAULT 1")
    assert parsed.unsupported is not None and "FROBNICATED" in parsed.unsupported
    known = ddl.parse("ALTER TABLE t ADD c VARCHAR(5) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL "
                      "DEFAULT 'x' COMMENT 'nick' INVISIBLE ON UPDATE CURRENT_TIMESTAMP CHECK (c <> '') AFTER b")
    assert known.unsupported is None


def test_truncate_is_recognised():
    assert ddl.parse("TRUNCATE TABLE demo.t").truncate and ddl.parse("truncate t").truncate


# -- the planner ----------------------------------------------------------------------------


def test_an_added_column_takes_its_default_or_null_and_goes_last():
    evolution = planned("ALTER TABLE t ADD c VARCHAR(5) NOT NULL DEFAULT 'x' FIRST, ADD d INT",
                        now(col("c", "varchar(5)", False), col("d", "int(11)")))
    assert evolution.schema.column_names == ("id", "name", "n", "amount", "kind", "c", "d")
    assert evolution.changes == (LakeChange(Kind.ADD, "c", type="string", value="x"),
                                 LakeChange(Kind.ADD, "d", type="int"))
    assert evolution.changes[0].rewrites_rows and not evolution.changes[1].rewrites_rows


@pytest.mark.parametrize(("definition", "info", "value"), [
    ("INT NOT NULL", col("c", "int(11)", False), "0"),
    ("VARCHAR(3) NOT NULL", col("c", "varchar(3)", False), ""),
    ("ENUM('x','y') NOT NULL", col("c", "enum('x','y')", False), "x"),
    ("DATE NOT NULL", col("c", "date", False), None),  # the zero date: NULL in the lake
])
def test_a_not_null_column_without_default_takes_the_servers_implicit_default(definition, info, value):
    (change,) = planned(f"ALTER TABLE t ADD c {definition}", now(info)).changes
    assert change.value == value


@pytest.mark.parametrize(("sql", "info", "reason"), [
    ("ALTER TABLE t ADD c DATETIME DEFAULT CURRENT_TIMESTAMP", col("c", "datetime"), "CURRENT_TIMESTAMP"),
    ("ALTER TABLE t ADD c INT AUTO_INCREMENT UNIQUE", col("c", "int(11)"), "AUTO_INCREMENT"),
    ("ALTER TABLE t ADD c INT AS (n + 1) VIRTUAL", col("c", "int(11)"), "generated"),
    ("ALTER TABLE t ADD c TIMESTAMP NOT NULL", col("c", "timestamp", False), "implicit default"),
    ("ALTER TABLE t ADD c BIT(3) DEFAULT 1", col("c", "bit(3)"), "not taken as written"),
    # MySQL converts these literals: a two-digit year, a case-folded ENUM member, a rounded
    # fraction, an escape whose meaning depends on sql_mode, a fraction into an integer.
    ("ALTER TABLE t ADD c YEAR DEFAULT 24", col("c", "year(4)"), "not taken as written"),
    ("ALTER TABLE t ADD c ENUM('a','b') DEFAULT 'A'", col("c", "enum('a','b')"), "not taken as written"),
    ("ALTER TABLE t ADD c DATETIME DEFAULT '2020-01-01 10:00:00.6'", col("c", "datetime"), "not taken as written"),
    ("ALTER TABLE t ADD c VARCHAR(9) DEFAULT 'a\\\\b'", col("c", "varchar(9)"), "not taken as written"),
    ("ALTER TABLE t ADD c INT DEFAULT 1.5", col("c", "int(11)"), "not taken as written"),
    # explicit_defaults_for_timestamp decides; the server shows NOT NULL for a declared NULL.
    ("ALTER TABLE t ADD c TIMESTAMP", col("c", "timestamp", False), "explicit_defaults_for_timestamp"),
    ("ALTER TABLE t ADD c INT NULL", col("c", "int(11)", False), "NOT NULL on the source"),
    ("ALTER TABLE t ADD _op INT", col("_op", "int(11)"), "name of a lake column"),
    # The server shows what a later DDL made of a column whose declaration does not say enough.
    ("ALTER TABLE t ADD c UUID", col("c", "inet6"), "another DDL changed it since"),
    ("ALTER TABLE t ADD c VARCHAR(5) CHARACTER SET binary", col("c", "varchar(9)"), "another DDL changed it since"),
])
def test_an_added_column_whose_existing_values_are_unknown_stops(sql, info, reason):
    current = now(info) if info.name == "c" else now()
    assert reason in refused(sql, current)


@pytest.mark.parametrize(("definition", "column_type", "spark"), [
    ("INT", "int", "int"),
    ("INT UNSIGNED", "int unsigned", "bigint"),
    ("DECIMAL(14,3)", "decimal(14,3)", "decimal(14,3)"),
    ("DATETIME(3)", "datetime(3)", "timestamp_ntz"),
    ("ENUM('x','y')", "enum('x','y')", "string"),
    ("BIT(1)", "bit(1)", "boolean"),
])
def test_a_column_the_server_shows_changed_since_is_taken_as_the_ddl_declared_it(definition, column_type, spark):
    # A later MODIFY made it a VARCHAR; a later DROP removed it: this DDL's rows still have its type.
    for current in (now(col("c", "varchar(9)")), now()):
        evolution = planned(f"ALTER TABLE t ADD c {definition}", current)
        assert evolution.schema.column("c").column_type == column_type
        assert evolution.changes == (LakeChange(Kind.ADD, "c", type=spark),)


def test_rename_and_drop_keep_the_other_columns_and_never_touch_the_key():
    evolution = planned("ALTER TABLE t RENAME COLUMN name TO title, DROP COLUMN kind", now())
    assert evolution.schema.column_names == ("id", "title", "n", "amount")
    assert evolution.schema.column("title").column_type == "varchar(20)"
    assert evolution.changes == (LakeChange(Kind.RENAME, "name", to="title"), LakeChange(Kind.DROP, "kind"))
    assert "key column id" in refused("ALTER TABLE t DROP COLUMN id", now())
    assert "key column id" in refused("ALTER TABLE t RENAME COLUMN id TO pk", now())
    assert "key column id" in refused("ALTER TABLE t MODIFY id BIGINT NOT NULL", now(col("id", "bigint(20)", False)))
    assert "exists already" in refused("ALTER TABLE t RENAME COLUMN name TO n", now())


def test_widening_casts_and_a_new_not_null_fills_the_former_nulls():
    evolution = planned("ALTER TABLE t MODIFY n BIGINT NOT NULL, MODIFY amount DECIMAL(14,3)",
                        now(col("n", "bigint(20)", False), col("amount", "decimal(14,3)", precision=14, scale=3)))
    assert evolution.changes == (LakeChange(Kind.CAST, "n", type="bigint"), LakeChange(Kind.FILL, "n", value="0"),
                                 LakeChange(Kind.CAST, "amount", type="decimal(14,3)"))
    # CHANGE renames and redefines at once; a longer VARCHAR keeps the Spark type: nothing to cast.
    change = planned("ALTER TABLE t CHANGE name title VARCHAR(40)", now(col("title", "varchar(40)"), drop=("name",)))
    assert change.changes == (LakeChange(Kind.RENAME, "name", to="title"),)


@pytest.mark.parametrize(("old", "new", "kept"), [
    (col("c", "int(11)"), col("c", "bigint(20)"), True),
    (col("c", "int(10) unsigned"), col("c", "bigint(20)"), True),
    (col("c", "int(10) unsigned"), col("c", "int(11)"), False),
    (col("c", "bigint(20)"), col("c", "int(11)"), False),
    (col("c", "decimal(10,2)", precision=10, scale=2), col("c", "decimal(12,2)", precision=12, scale=2), True),
    (col("c", "decimal(10,2)", precision=10, scale=2), col("c", "decimal(10,3)", precision=10, scale=3), False),
    (col("c", "varchar(20)", charset="utf8mb4"), col("c", "varchar(10)", charset="utf8mb4"), False),
    (col("c", "varchar(20)", charset="utf8mb4"), col("c", "text", charset="utf8mb4"), True),
    (col("c", "varchar(20)", charset="latin1"), col("c", "varchar(40)", charset="utf8mb4"), False),
    (col("c", "varchar(20)"), col("c", "char(20)"), False),  # CHAR strips trailing spaces
    (col("c", "binary(4)"), col("c", "binary(8)"), False),  # pads with zero bytes
    (col("c", "float"), col("c", "double"), False),
    (col("c", "enum('a','b')"), col("c", "enum('a','b','c')"), True),
    (col("c", "enum('a','b')"), col("c", "enum('b','a')"), False),
    (col("c", "datetime"), col("c", "datetime(3)"), True),
    # Held as text past 38 digits: a new scale would print existing values differently.
    (col("c", "decimal(40,2)", precision=40, scale=2), col("c", "decimal(42,4)", precision=42, scale=4), False),
    # A TEXT may hold 65,535 one-byte characters: a VARCHAR(16384) would cut them.
    (col("c", "text"), col("c", "varchar(16384)"), False),
    (col("c", "tinytext"), col("c", "varchar(255)"), True),
    (col("c", "date"), col("c", "datetime"), False),
])
def test_only_changes_that_keep_every_stored_value_are_applied(old, new, kept):
    assert keeps_values(old, new) is kept


def test_column_names_match_without_case_and_keep_the_tables_spelling():
    evolution = planned("ALTER TABLE t DROP COLUMN NAME, RENAME COLUMN Amount TO total", now())
    assert evolution.changes == (LakeChange(Kind.DROP, "name"), LakeChange(Kind.RENAME, "amount", to="total"))


def test_a_char_default_is_stored_without_trailing_spaces():
    (change,) = planned("ALTER TABLE t ADD c CHAR(5) DEFAULT 'ab  '", now(col("c", "char(5)"))).changes
    assert change.value == "ab"


def test_not_null_follows_the_declaration_even_when_the_server_shows_a_later_null():
    # MODIFY n INT NOT NULL (NULLs became 0), then MODIFY n INT NULL, both before capture reads the first.
    evolution = planned("ALTER TABLE t MODIFY n INT NOT NULL", now(col("n", "int(11)", True)))
    assert LakeChange(Kind.FILL, "n", value="0") in evolution.changes
    assert not evolution.schema.column("n").nullable


def test_appended_set_members_change_no_value_but_bronze_records_the_new_description():
    before_set = TableSchema("demo", "t", (*BEFORE.columns, col("s", "set('a','b')")), ("id",))
    ddl_text = ddl.parse("ALTER TABLE t MODIFY s SET('a','b','c')")
    outcome = plan(before_set, ddl_text, TableSchema("demo", "t", (*BEFORE.columns, col("s", "set('a','b','c')")),
                                                     ("id",)))
    assert isinstance(outcome, Evolution)
    assert outcome.changes == (LakeChange(Kind.DESCRIBE, "s"),)
    assert outcome.schema.column("s").members == ("a", "b", "c")


def test_a_narrowing_modify_stops_naming_both_types():
    reason = refused("ALTER TABLE t MODIFY name VARCHAR(5)", now(col("name", "varchar(5)")))
    assert "varchar(20)" in reason and "varchar(5)" in reason


def test_the_checkpoint_of_a_ddl_round_trips_its_changes():
    changes = (LakeChange(Kind.ADD, "c", type="decimal(12,3)", value="1.5"), LakeChange(Kind.RENAME, "a", to="b"))
    checkpoint = Checkpoint("t", 7, Phase.BINLOG, "run", position=BinlogPosition("mysql-bin.000001", 4),
                            ddl="ALTER TABLE t ...", schema_changes=changes)
    again = Checkpoint.from_json(checkpoint.to_json())
    assert again == checkpoint
    # The next checkpoint is an ordinary one: silver must not replay the changes twice.
    later = again.advanced_to(BinlogPosition("mysql-bin.000001", 99), "run")
    assert later.schema_changes == () and later.ddl is None
