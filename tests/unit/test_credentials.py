"""A password in --storage is never shown or stored: header line, messages, runs.command and
`autotune status` (which anyone who can read the database may run) mask it."""

from __future__ import annotations

import sqlite3
import string
from urllib.parse import quote

import pytest
from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import autotune.gpu.evaluator
import autotune.store
import autotune.tuning.session
from autotune.cli.app import main
from autotune.store import Store, hide_passwords, masked_command
from tests.conftest import SyntheticEvaluator

SECRET = "s3cr3t-Pa55"
URL = f"postgresql+psycopg://tuner:{SECRET}@db-host:5432/autotune"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (URL, "postgresql+psycopg://tuner:***@db-host:5432/autotune"),
        (f"run --storage '{URL}' --budget 3", "run --storage 'postgresql+psycopg://tuner:***@"),
        (f"--storage=postgresql://u:{SECRET}@h/d?host=/run/pg", "--storage=postgresql://u:***@h/d"),
        (f"postgresql://u:a@b{SECRET}@h/d", "postgresql://u:***@h/d"),  # an @ in the password
        ("postgresql://tuner@db-host/autotune", "postgresql://tuner@db-host/autotune"),
        ("sqlite:///results/autotune.db", "sqlite:///results/autotune.db"),
    ],
)
def test_hide_passwords(text, shown) -> None:
    assert shown in hide_passwords(text)
    assert SECRET not in hide_passwords(text)


def test_run_and_status_never_show_the_password(tmp_path, monkeypatch) -> None:
    db = tmp_path / "r.db"
    # The PostgreSQL URL leads to an SQLite file: what is under test is what is shown and stored.
    real_store = Store
    monkeypatch.setattr(autotune.store, "Store", lambda url, **kw: real_store(db, **kw))
    monkeypatch.setattr(autotune.tuning.session, "Store", lambda url, **kw: real_store(db, **kw))
    monkeypatch.setattr(
        autotune.gpu.evaluator, "GpuEvaluator", lambda index=0: SyntheticEvaluator(lambda d: 1.0)
    )
    args = ["run", "--family", "direct_naive", "--shape", "N=9,K=3,C=1,F=2", "--no-baseline"]
    args += ["--budget", "2", "--storage", URL]
    monkeypatch.setattr("sys.argv", ["autotune", *args])  # what runs.command is made of
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "storage postgresql+psycopg://tuner:***@db-host" in result.output
    assert SECRET not in result.output
    with sqlite3.connect(db) as con:
        commands = [row[0] for row in con.execute("SELECT command FROM runs")]
        # A run stored by an earlier autotune, with the password in its command.
        con.execute(
            "INSERT INTO runs (device_id, started_at, command, versions, host) "
            "VALUES (1, '2026-11-23 10:00:00', ?, '{}', 'node1')",
            (f"autotune run --storage {URL}",),
        )
    assert commands and all("tuner:***@" in c and SECRET not in c for c in commands)
    shown = CliRunner().invoke(main, ["status", "--all", "--storage", URL])
    assert shown.exit_code == 0, shown.output
    assert "tuner:***@db-host" in shown.output
    assert SECRET not in shown.output


def test_an_unreachable_database_is_named_without_its_password(tmp_path) -> None:
    url = f"postgresql://tuner:{SECRET}@127.0.0.1:1/autotune"
    result = CliRunner().invoke(main, ["best", "--storage", url])
    assert result.exit_code == 1
    assert "postgresql://tuner:***@127.0.0.1:1/autotune" in result.output
    assert SECRET not in result.output


# Issue 38: the cases that leaked, each through the one mask.
@pytest.mark.parametrize(
    "text",
    [
        f"postgresql://tuner@127.0.0.1:1/autotune?password={SECRET}",
        f"postgresql://tuner@h/d?sslmode=require&PassWord={SECRET}&x=1",
        f"postgresql://tuner@h/d?pass%77ord={SECRET}",  # the name percent-encoded
        f"postgresql://tuner:pa/{SECRET}@h/d",  # a / in the password
        f"postgresql://tuner:{SECRET}%40x@h/d",  # percent-encoded
        f"postgresql://tuner:a@b{SECRET}@h/d",  # an unescaped @
        f"postgresql://u:{SECRET}@[::1:1/db",  # malformed
        f"host=db user=tuner password={SECRET} dbname=autotune",  # libpq keywords
    ],
)
def test_every_form_of_password_is_masked(text) -> None:
    assert SECRET not in hide_passwords(text)
    assert SECRET not in masked_command(["autotune", "best", "--storage", text])


def test_a_command_line_is_masked_argument_by_argument() -> None:
    # A shell-quoted password may hold blanks and quotes; the URL runs to the argument's end.
    shown = masked_command(["autotune", "--storage", "postgresql://u:my s3cr'et@h/d", "--budget"])
    assert shown == "autotune --storage 'postgresql://u:***@h/d' --budget"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        (f"postgresql://tuner@127.0.0.1:1/autotune?password={SECRET}", "password=***"),
        (f"postgresql://u:{SECRET}@[::1:1/db", "cannot open results database"),
        (f"postgresql://u:a@b{SECRET}@127.0.0.1:1/db", "write an '@' in a user name or password"),
        (f"postgresql://u:pa/{SECRET}@127.0.0.1:1/db", "postgresql://u:***@127.0.0.1:1/db"),
    ],
)
@pytest.mark.parametrize("command", [["best"], ["status", "--all"]])
def test_a_bad_or_unreachable_url_is_one_line_without_the_password(url, said, command) -> None:
    result = CliRunner().invoke(main, [*command, "--storage", url])
    assert result.exit_code == 1, result.output
    assert said in result.output and SECRET not in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


_PIECE = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=12
)
_SCHEMES = st.sampled_from(["postgresql", "postgresql+psycopg", "mysql+pymysql", "sqlite"])


@st.composite
def _url_with_a_secret(draw) -> tuple[str, str]:
    """A URL (perhaps malformed) with the secret as its password, in the user-info or in a
    query parameter, raw or percent-encoded, inside a text or a command line."""
    secret = "Zq" + draw(st.text(alphabet=string.printable.strip(), min_size=4, max_size=16))
    secret = secret.replace("***", "")
    encoded = draw(st.booleans())
    password = quote(secret, safe="") if encoded else secret
    where = draw(st.sampled_from(["userinfo", "query", "both"]))
    user = draw(st.sampled_from(["tuner", "u", "a.b", "x%40y"]))
    host = draw(st.sampled_from(["db", "127.0.0.1:1", "[::1]:5432", "[::1:1", "h-1.example"]))
    key = draw(st.sampled_from(["password", "PASSWORD", "pass%77ord", "sslpassword"]))
    query = draw(st.sampled_from(["", "sslmode=require", "host=/run/pg&x=1"]))
    userinfo = f"{user}@" if where == "query" else f"{user}:{password}@"
    params = [p for p in (query, f"{key}={password}" if where != "userinfo" else "") if p]
    url = f"{draw(_SCHEMES)}://{userinfo}{host}/autotune" + (
        "?" + "&".join(params) if params else ""
    )
    # Blanks and quotes reach a URL only inside one argument (a shell keeps them together).
    assume(encoded or not any(c in secret for c in " \t\n\r\x0b\x0c'\"<>`"))
    before, after = draw(_PIECE), draw(_PIECE)
    assume(not any(c in before + after for c in "@:/?=&%"))
    return secret if not encoded else password, f"{before} {url} {after}"


@settings(max_examples=300, deadline=None)
@given(_url_with_a_secret())
def test_no_generated_password_survives_the_mask(case) -> None:
    secret, text = case
    assert secret not in hide_passwords(text)
    assert secret not in masked_command(text.split(" "))
    assert secret not in hide_passwords(hide_passwords(text))  # masking twice changes nothing
    assert hide_passwords(hide_passwords(text)) == hide_passwords(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_the_mask_never_fails(text) -> None:
    hide_passwords(text)
    masked_command([text, text])
