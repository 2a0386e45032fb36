"""The results database's schema: its tables, their version, and the column helpers they share."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import sqlalchemy as sa

from autotune.model.kinds import KIND_SPECS
from autotune.model.problem import Problem

SCHEMA_VERSION = 8  # kept in the meta table; migrations.py brings older databases to it

METADATA = sa.MetaData()
SHAPE_COLUMNS = KIND_SPECS["conv2d"].columns  # a 2D convolution's fields, as integer columns
KIND_DEFAULT = "conv2d"  # what every row of a version-2 database is


def _shape_columns() -> list[sa.Column]:
    """The problem's kind, its fields as JSON (every kind), and a 2D convolution's fields as
    integer columns (filled for conv2d rows only, empty for the other kinds)."""
    return [
        sa.Column("kind", sa.String(16), nullable=False, server_default=KIND_DEFAULT),
        sa.Column("shape", sa.JSON),
        *(sa.Column(name, sa.Integer) for name in SHAPE_COLUMNS),
    ]


def _timing_columns() -> list[sa.Column]:
    """How a time was measured: the timing protocol's number (rows written before protocols were
    numbered are protocol 1) and the spread of the samples (interquartile range over median)."""
    return [
        sa.Column("protocol", sa.Integer, nullable=False, server_default="1"),
        sa.Column("spread", sa.Float),
    ]


def _samples_column() -> sa.Column:
    """The timing samples, packed (store/samples.py); frames read them back as `samples_ms`."""
    return sa.Column("samples", sa.LargeBinary, nullable=False)


def shape_values(problem: Problem) -> dict[str, Any]:
    """The kind, shape JSON and conv2d columns of a row about problem (see _shape_columns)."""
    conv2d = problem.kind == "conv2d"
    return {
        "kind": problem.kind,
        "shape": problem.as_dict(),
        **{name: getattr(problem, name) if conv2d else None for name in SHAPE_COLUMNS},
    }


meta_table = sa.Table(
    "meta",
    METADATA,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

devices_table = sa.Table(
    "devices",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String(200), nullable=False),
    sa.Column("compute_capability", sa.String(16), nullable=False),
    sa.Column("sm_count", sa.Integer, nullable=False),
    sa.Column("driver_version", sa.String(64), nullable=False),
    sa.Column("runtime_version", sa.String(64), nullable=False),
    sa.Column("nvrtc_version", sa.String(64), nullable=False),
    sa.Column("clock_mhz", sa.Integer, nullable=False),
    sa.Column("memory_bytes", sa.BigInteger, nullable=False),
    sa.Column("extra", sa.JSON, nullable=False),  # measured peaks and anything else
    sa.UniqueConstraint(
        "name", "compute_capability", "sm_count", "driver_version", name="uq_devices_identity"
    ),
)

runs_table = sa.Table(
    "runs",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id"), nullable=False),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
    sa.Column("command", sa.Text, nullable=False),
    sa.Column("versions", sa.JSON, nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
)

# What makes an evaluation itself: its study, its configuration, the timing protocol and the code
# measured. Unique in the table (through identity_digest below); a merge matches rows by it.
EVALUATION_IDENTITY = ("device_id", "family", "problem_key", "config", "protocol", "kernel_digest")
# The identity's fields that identity_digest covers: all but the device, whose id is the
# database's own (a merge renumbers it), so that a row's digest is the same in every database.
DIGESTED_IDENTITY = EVALUATION_IDENTITY[1:]


def identity_digest(
    family: str, problem_key: str, config: str, protocol: int, kernel_digest: str
) -> int:
    """The evaluation's identity in 8 bytes, as a signed 64-bit integer (what SQLite and
    PostgreSQL store in 8 bytes): the first 8 bytes of SHA-256 of the fields as a JSON array.
    The unique index holds this instead of the fields themselves, which were 178 bytes of
    every row; writes.py tells a collision (about 3e-12 for a study of 10^4 rows) from a
    duplicate by the fields."""
    text = json.dumps(
        [family, problem_key, config, int(protocol), kernel_digest],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


def with_identity_digest(row: dict[str, Any]) -> dict[str, Any]:
    """An evaluations row (a dict of its columns) with its identity_digest filled in."""
    return {**row, "identity_digest": identity_digest(*(row[n] for n in DIGESTED_IDENTITY))}


evaluations_table = sa.Table(
    "evaluations",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id"), nullable=False),
    sa.Column("family", sa.String(100), nullable=False),
    sa.Column("problem_key", sa.String(200), nullable=False),
    *_shape_columns(),
    sa.Column("config", sa.Text, nullable=False),  # Config.to_json(): canonical, so comparable
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("rel_error", sa.Float),
    sa.Column("compile_s", sa.Float),
    sa.Column("time_ms", sa.Float),  # median of samples_ms
    _samples_column(),
    sa.Column("gflops", sa.Float),
    sa.Column("registers", sa.Integer),
    sa.Column("smem_bytes", sa.Integer),
    sa.Column("spills", sa.Integer),
    sa.Column("scratch_bytes", sa.BigInteger),  # extra device memory of the plan (im2col's matrix)
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    *_timing_columns(),
    # The digest of the code measured (Family.kernel_digest); "" (none known) for rows stored
    # before version 6 until `autotune data backfill` gives them their family's. Not NULL: a
    # unique constraint takes NULLs as all different, and would store one evaluation twice.
    sa.Column("kernel_digest", sa.String(64), nullable=False, server_default=""),
    # Since version 7: identity_digest() of the row's identity fields, set by every write.
    sa.Column("identity_digest", sa.BigInteger, nullable=False),
    # One row per finished evaluation, protocol and kernel digest (a re-measurement under a new
    # protocol, or of changed code, is a new row; the old one stays). The study's columns lead,
    # so that the index serves the per-study queries (resume, claims' counts); the digest
    # stands for the rest of the identity (config, protocol, kernel digest), which the full
    # fields made 178 bytes an entry, about a quarter of the file.
    sa.UniqueConstraint(
        "device_id", "family", "problem_key", "identity_digest", name="uq_evaluations"
    ),
)

ceilings_table = sa.Table(
    "ceilings",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id"), nullable=False),
    sa.Column("name", sa.String(64), nullable=False),  # fma_peak, copy_bandwidth, sgemm
    sa.Column("value", sa.Float, nullable=False),
    sa.Column("unit", sa.String(32), nullable=False),  # GFlop/s, GB/s
    sa.Column("detail", sa.Text, nullable=False),  # how it was measured
    _samples_column(),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    *_timing_columns(),
)

baselines_table = sa.Table(
    "baselines",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id"), nullable=False),
    sa.Column("library", sa.String(64), nullable=False),  # cudnn, cublas
    sa.Column("problem_key", sa.String(200), nullable=False),
    *_shape_columns(),
    sa.Column("algorithm", sa.Text, nullable=False),  # what the library chose
    sa.Column("version", sa.String(64), nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("time_ms", sa.Float),
    _samples_column(),
    sa.Column("gflops", sa.Float),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    *_timing_columns(),
    sa.UniqueConstraint("device_id", "library", "problem_key", "protocol", name="uq_baselines"),
)

# Which run is tuning a study: one run at a time per (device, family, problem). The holder renews
# its lease as it records evaluations; an expired lease (or a holder process known dead) may be
# taken over by another run. See autotune/tuning/claims.py.
claims_table = sa.Table(
    "claims",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("device_id", sa.Integer, sa.ForeignKey("devices.id"), nullable=False),
    sa.Column("family", sa.String(100), nullable=False),
    sa.Column("problem_key", sa.String(200), nullable=False),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("host", sa.String(255), nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),  # Unix time in seconds
    sa.UniqueConstraint("device_id", "family", "problem_key", name="uq_claims"),
)


# What the GPU worker observed of the device around an evaluation's timed runs (NVML power,
# energy per run, clocks, temperature, throttling; model/observe.py names them): one row per
# reading, so that the evaluations table stays as it was for the many runs that observe nothing.
# No foreign key: SQLite's upgrades rebuild the evaluations table (drop and rename), which a
# key would block or cascade into; writes.py deletes an evaluation's readings with it.
def _readings_table(name: str, row_column: str) -> sa.Table:
    """A table of readings, (row, name) -> value, of the rows of another table."""
    return sa.Table(
        name,
        METADATA,
        sa.Column(row_column, sa.Integer, primary_key=True),
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.Float, nullable=False),
    )


observations_table = _readings_table("observations", "evaluation_id")
# The same readings of a library's baseline (`autotune baseline --observe`), so that a table can
# put cuDNN's power and energy beside ours. No foreign key, for the same reason; writes.py
# replaces a baseline's readings with the baseline.
baseline_observations_table = _readings_table("baseline_observations", "baseline_id")


# Since version 8: the measurements of an evaluation after its first (the tuner confirming a
# study's best, store/repeats.py), one row each, numbered 1, 2, ... per evaluation: the
# evaluations table keeps one row per identity, and a configuration's figure is the median of
# its first measurement (evaluations.time_ms) and these. No foreign key to the evaluation, for the
# readings' reason above; writes.py deletes an evaluation's repeats with it.
repeats_table = sa.Table(
    "repeats",
    METADATA,
    sa.Column("evaluation_id", sa.Integer, primary_key=True),
    sa.Column("sequence", sa.Integer, primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
    sa.Column("time_ms", sa.Float, nullable=False),  # median of samples
    _samples_column(),
    sa.Column("spread", sa.Float),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
