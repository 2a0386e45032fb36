"""Text from a file or a user shown back: on one line, short, every control character escaped,
so that a terminal shows it and never obeys it (ESC sequences, bidi overrides)."""

from __future__ import annotations

EXCERPT_CHARS = 80  # what an error quotes of a file's content: enough to find the line


def _escape(ch: str) -> str:
    return ch.encode("unicode_escape").decode("ascii")


def printable(text: object) -> str:
    """`text` with every character a terminal would not print as itself (C0 and C1 controls,
    DEL, newlines, tabs, format characters such as U+202E) written as its escape: \\x1b, \\n,
    \\u202e. Spaces stay."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == " " else _escape(ch) for ch in text)


def quoted(text: object, limit: int = EXCERPT_CHARS) -> str:
    """`text` in quotes as an error shows a value it refuses: escaped (repr's rules), and cut
    to `limit` characters with '...' after the quote when longer. A value that is no string
    is shown as its repr (27.9, True, [1]), cut the same way."""
    if not isinstance(text, str):
        shown = printable(repr(text))
        return shown if len(shown) <= limit else shown[:limit] + "..."
    if len(text) <= limit:
        return repr(text)
    return repr(text[:limit]) + "..."


MESSAGE_CHARS = 1000  # an error quoting a whole file is still one line, but not a useful one


def one_line(text: object, limit: int = MESSAGE_CHARS) -> str:
    """A message on one line: its lines joined by ' / ', made printable, cut to `limit`."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    joined = printable(" / ".join(lines))
    return joined if len(joined) <= limit else joined[:limit] + "..."


__all__ = ["EXCERPT_CHARS", "MESSAGE_CHARS", "one_line", "printable", "quoted"]
