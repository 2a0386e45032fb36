"""Schema upgrades: an older results database brought to this schema, keeping every row."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from autotune.model.problem import ConvProblem
from autotune.store.samples import pack_json
from autotune.store.schema import (
    DIGESTED_IDENTITY,
    KIND_DEFAULT,
    SCHEMA_VERSION,
    SHAPE_COLUMNS,
    baselines_table,
    ceilings_table,
    devices_table,
    evaluations_table,
    identity_digest,
    meta_table,
    runs_table,
)

# Versions this one can open by adding what it lacks: 1 had no ceilings and no baselines tables;
# 2 knew only 2D convolutions (no kind, no shape JSON, no scratch_bytes, conv2d columns required);
# 3 had no claims table (an older autotune would ignore other runs' claims, hence the new number);
# 4 had no timing protocol and no spread (its rows are protocol 1, DESIGN section 2);
# 5 kept timing samples as JSON text (packed into `samples` now) and no kernel digest (its rows
# have none: stale until `autotune data backfill` gives them their family's), and had no
# observations table (created by the store's create_all);
# 6 had its unique index over the identity's fields themselves (no identity_digest column);
# 7 had no repeats table (created by the store's create_all; an autotune of version 7 would
# neither delete nor merge an evaluation's repeats, hence the new number).
UPGRADABLE_FROM = ("1", "2", "3", "4", "5", "6", "7")

# Not Alembic (installed with Optuna): it keeps its revision in a table of its own, while every
# autotune ever released reads meta.schema_version to refuse a schema it does not know, so the two
# would have to be kept in step; and each of versions 1 to 4 comes up by one "add what is missing"
# step, under the cross-process lock below, which Alembic would not take for us.

PACK_FUNCTION = "autotune_pack_samples"  # SQL name of samples.pack_json in the SQLite upgrade
DIGEST_FUNCTION = "autotune_identity_digest"  # and of schema.identity_digest


@contextmanager
def immediate_transaction(engine: Engine) -> Iterator[sa.Connection]:
    """One write transaction that takes the write lock at once: on SQLite an explicit BEGIN
    IMMEDIATE, so that a second process writing the same file waits for this one instead of
    failing half-way (PostgreSQL locks rows as they are written)."""
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as conn:
        if sqlite:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.begin()
        try:
            yield conn
        except BaseException:
            conn.exec_driver_sql("ROLLBACK") if sqlite else conn.rollback()
            raise
        conn.exec_driver_sql("COMMIT") if sqlite else conn.commit()


def upgrade(engine: Engine) -> None:
    """Bring the evaluations, baselines and ceilings tables of an older database to this schema,
    keeping every row (ids included), in one transaction that also sets the version: a second
    process upgrading the same database waits for this one, then finds the new version and
    leaves the tables alone."""
    sqlite = engine.dialect.name == "sqlite"
    rebuilt = False
    with immediate_transaction(engine) as conn:
        # FOR UPDATE (PostgreSQL): a second process upgrading at once waits here, then
        # reads the new version (on SQLite the transaction's BEGIN IMMEDIATE did the same).
        version = conn.execute(
            sa.select(meta_table.c.value)
            .where(meta_table.c.key == "schema_version")
            .with_for_update()
        ).scalar_one()
        if version != str(SCHEMA_VERSION):
            for table in (evaluations_table, baselines_table, ceilings_table):
                old = {c["name"] for c in sa.inspect(conn).get_columns(table.name)}
                missing = {c.name for c in table.columns} - old
                if not missing:
                    continue
                rebuilt = True
                if sqlite:
                    _rebuild_sqlite_table(conn, table, old)
                else:
                    _alter_table(conn, table, old)
            conn.execute(
                meta_table.update()
                .where(meta_table.c.key == "schema_version")
                .values(value=str(SCHEMA_VERSION))
            )
    if sqlite and rebuilt:
        # The copied tables left the old ones' pages free: give them back to the file system.
        # Best effort: another process reading the file makes VACUUM wait, then give up, which
        # costs only disk space.
        try:
            with engine.connect() as conn:
                conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM")
        except DBAPIError:
            pass


def _conv2d_shape_json(columns: Any) -> sa.ColumnElement[Any]:
    """SQL building the shape JSON of a stored 2D convolution from its integer columns."""
    pairs = []
    for name in ConvProblem.sizes:  # the integer columns (a padding has none: it came later)
        pairs += [sa.literal(name), columns[name]]
    return sa.func.json_object(*pairs)


def _rebuild_sqlite_table(conn: sa.Connection, table: sa.Table, old_columns: set[str]) -> None:
    """SQLite cannot drop a NOT NULL: copy the rows into a table of the new form, then swap."""
    scratch = sa.MetaData()
    for parent in (devices_table, runs_table):  # the foreign keys' targets, for the DDL
        parent.to_metadata(scratch)
    new = table.to_metadata(scratch, name=f"{table.name}_upgrade")
    new.create(conn)
    old = sa.table(table.name, *(sa.column(name) for name in old_columns))
    copied = [c.name for c in table.columns if c.name in old_columns]
    derived: dict[str, sa.ColumnElement[Any]] = {}
    if "shape" in table.columns and "shape" not in old_columns:
        derived = {"kind": sa.literal(KIND_DEFAULT), "shape": _conv2d_shape_json(old.c)}
    if "samples" not in old_columns and "samples_ms" in old_columns:
        # The JSON text packed row by row, inside the copy: Python's function called by SQLite.
        conn.connection.driver_connection.create_function(
            PACK_FUNCTION, 1, pack_json, deterministic=True
        )
        derived["samples"] = getattr(sa.func, PACK_FUNCTION)(old.c.samples_ms)
    if "identity_digest" in table.columns and "identity_digest" not in old_columns:
        driver = conn.connection.driver_connection
        driver.create_function(DIGEST_FUNCTION, 5, identity_digest, deterministic=True)
        fields = [_old_or_default(old, old_columns, table.c[n]) for n in DIGESTED_IDENTITY]
        derived["identity_digest"] = getattr(sa.func, DIGEST_FUNCTION)(*fields)
    # Columns new to this version that the old rows cannot fill from others (protocol, spread)
    # take their server defaults.
    extra = [n for n in derived if n not in old_columns]
    select = sa.select(*(old.c[n] for n in copied), *(derived[n] for n in extra))
    conn.execute(new.insert().from_select([*copied, *extra], select))
    conn.exec_driver_sql(f'DROP TABLE "{table.name}"')
    conn.exec_driver_sql(f'ALTER TABLE "{new.name}" RENAME TO "{table.name}"')


def _old_or_default(old: Any, old_columns: set[str], column: sa.Column) -> Any:
    """A column of the old rows in SQL, or the server default the copy gives them where the
    old table lacks it (protocol and kernel_digest, new in versions 5 and 6)."""
    if column.name in old_columns:
        return old.c[column.name]
    return sa.literal(column.server_default.arg)


def _fill_identity_digests(conn: sa.Connection, table: sa.Table) -> None:
    """Each stored evaluation's identity digest, computed here row by row (PostgreSQL has
    SHA-256, SQLite none: one definition, in Python, for both)."""
    c = table.c
    fields = [c[name] for name in DIGESTED_IDENTITY]
    rows = conn.execute(sa.select(c.id, *fields).where(c.identity_digest.is_(None))).all()
    digests = [{"row_id": r[0], "digest": identity_digest(*r[1:])} for r in rows]
    if digests:
        conn.execute(
            table.update()
            .where(c.id == sa.bindparam("row_id"))
            .values(identity_digest=sa.bindparam("digest")),
            digests,
        )


def _alter_table(conn: sa.Connection, table: sa.Table, old_columns: set[str]) -> None:
    """Other databases (PostgreSQL) alter in place: add the new columns, pack the stored rows'
    JSON timing samples and compute their identity digests, rebuild the unique constraints
    that gained a column, drop the NOT NULLs of the conv2d columns and fill the shape JSON of
    the stored rows."""
    preparer = conn.dialect.identifier_preparer
    name = preparer.format_table(table)
    added = set()
    packing = "samples" not in old_columns and "samples_ms" in old_columns
    for column in table.columns:
        if column.name in old_columns:
            continue
        added.add(column.name)
        if column.name in ("samples", "identity_digest"):  # filled below, then required
            column = sa.Column(column.name, column.type, nullable=True)
        ddl = sa.schema.CreateColumn(column).compile(dialect=conn.dialect)
        conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN {ddl}")
    if packing:
        old = sa.table(table.name, sa.column("id"), sa.column("samples_ms", sa.Text))
        new = sa.table(table.name, sa.column("id"), sa.column("samples", sa.LargeBinary))
        rows = conn.execute(sa.select(old.c.id, sa.cast(old.c.samples_ms, sa.Text))).all()
        for row_id, text in rows:
            conn.execute(new.update().where(new.c.id == row_id).values(samples=pack_json(text)))
        conn.exec_driver_sql(f"ALTER TABLE {name} ALTER COLUMN samples SET NOT NULL")
        conn.exec_driver_sql(f"ALTER TABLE {name} DROP COLUMN samples_ms")
    if "identity_digest" in added:
        _fill_identity_digests(conn, table)
        conn.exec_driver_sql(f"ALTER TABLE {name} ALTER COLUMN identity_digest SET NOT NULL")
    for constraint in table.constraints:
        if isinstance(constraint, sa.UniqueConstraint) and added & set(constraint.columns.keys()):
            quoted = preparer.format_constraint(constraint)
            conn.exec_driver_sql(f"ALTER TABLE {name} DROP CONSTRAINT IF EXISTS {quoted}")
            # Not isolated: by default AddConstraint marks the shared table's constraint as
            # made apart, and every database created later in the process would lack it.
            conn.execute(sa.schema.AddConstraint(constraint, isolate_from_table=False))
    if "shape" not in table.columns:
        return
    for column in SHAPE_COLUMNS:
        conn.exec_driver_sql(
            f"ALTER TABLE {name} ALTER COLUMN {preparer.quote(column)} DROP NOT NULL"
        )
    c = table.c
    rows = conn.execute(sa.select(c.id, *(c[n] for n in SHAPE_COLUMNS)).where(c.shape.is_(None)))
    for row in rows.all():
        shape = {n: getattr(row, n) for n in ConvProblem.sizes}
        conn.execute(table.update().where(c.id == row.id).values(shape=shape))
