"""The documentation: generated references up to date, every command and option that README.md
and docs/ name exists in the click app, and the site builds with MkDocs in strict mode (a
broken link fails it)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from autotune.cli.app import main
from autotune.cli.reference import PAGES, stale

ROOT = Path(__file__).resolve().parents[2]
PAGES_NAMED = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# Options of other programs that the docs quote on their own (Slurm's, in a job script's text).
FOREIGN_OPTIONS = {"--gres"}

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`([^`\n]+)`")
COMMAND = re.compile(r"(?<![\w./-])autotune\s+([a-z][a-z0-9-]*)(?:\s+([a-z][a-z0-9-]*))?")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _segments(text: str) -> list[str]:
    """Shell lines of the code blocks (continuations joined, comments dropped; Python blocks
    left out: `from autotune import ...` is no command) and inline code spans."""
    out = []
    for language, body in FENCE.findall(text):
        if language in ("python", "toml", "cuda", "cpp"):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            out.append(line.split(" # ")[0].split("  #")[0])
    spans = INLINE.findall(FENCE.sub("", text))
    return out + [s for s in spans if not re.match(r"(from|import) ", s)]


def _command(names: tuple[str, ...]) -> tuple[str, click.Command] | None:
    ctx = click.Context(main, info_name="autotune")
    command: click.Command = main
    path = []
    for name in names:
        if not isinstance(command, click.Group) or not name:
            break
        sub = command.get_command(ctx, name)
        if sub is None:
            return None
        command, path = sub, [*path, name]
        ctx = click.Context(command, info_name=name, parent=ctx)
    return " ".join(path), command


def _options(command: click.Command) -> set[str]:
    opts = {"--help"}
    for param in command.params:
        opts.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("--"))
    return opts


def _all_commands(group: click.Group = main, ctx=None):
    ctx = ctx or click.Context(main, info_name="autotune")
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield command
        if isinstance(command, click.Group):
            yield from _all_commands(command, click.Context(command, info_name=name, parent=ctx))


def named_in(text: str) -> list[str]:
    """What the text names that the app lacks: unknown commands, and options unknown to the
    command they follow (or, for an inline option on its own, to every command)."""
    every_option = set().union(*(_options(c) for c in _all_commands()))
    missing = []
    for segment in _segments(text):
        matches = list(COMMAND.finditer(segment))
        if not matches:
            if segment.startswith("--"):
                missing += [
                    o for o in OPTION.findall(segment)[:1]
                    if o not in every_option and o not in FOREIGN_OPTIONS
                ]  # fmt: skip
            continue
        for index, m in enumerate(matches):
            end = matches[index + 1].start() if index + 1 < len(matches) else len(segment)
            found = _command((m[1], m[2] or ""))
            if found is None:
                missing.append(f"autotune {m[1]}")
                continue
            path, command = found
            known = _options(command)
            missing += [
                f"autotune {path} {o}" for o in OPTION.findall(segment[m.end(1) : end])
                if o not in known
            ]  # fmt: skip
    return missing


def test_the_checker_sees_a_missing_command_and_option() -> None:
    text = "Run `autotune run --bogus 3` or `autotune frobnicate`, then `--no-such-option`.\n"
    text += "```sh\nautotune best --format csv \\\n    --nope\n```\n"
    assert named_in(text) == [
        "autotune best --nope",
        "autotune run --bogus",
        "autotune frobnicate",
        "--no-such-option",
    ]
    assert named_in("`autotune bench dispatch --launcher driver`, `--gpus all`") == []


@pytest.mark.parametrize("page", PAGES_NAMED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_command_and_option_named_exists(page: Path) -> None:
    assert named_in(page.read_text()) == []


def test_the_generated_references_are_up_to_date() -> None:
    assert stale(ROOT) == [], "run: python -m autotune.cli.reference"
    assert set(PAGES) <= {p.relative_to(ROOT) for p in PAGES_NAMED}


def test_the_site_builds_strictly(tmp_path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is in the test extra")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "reference" / "cli" / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is in the test extra")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\nSee [nothing](missing.md).\n")
    (tmp_path / "mkdocs.yml").write_text((ROOT / "mkdocs.yml").read_text().split("nav:")[0])
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "s")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "missing.md" in done.stdout + done.stderr
