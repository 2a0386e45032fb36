"""Passwords in database URLs: the one mask for every text a URL or a driver's error can reach
(output, messages, `runs.command`, `status`), and the URLs refused before a driver sees them."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from urllib.parse import unquote

MASK = "***"

# A URL in a text runs to the first blank or quote: a password with a blank or a quote is only
# written percent-encoded (or the whole argument is masked, see hide_password_in_argument).
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]*")
# Query parameters that carry a secret, compared after percent-decoding and lower-casing.
_SECRET_KEYS = frozenset({"password", "sslpassword", "pass", "pwd"})
# libpq's keyword form (host=... password=...), as a driver's message may echo it.
_KEYWORD = re.compile(r"(?i)\b((?:ssl)?password\s*=\s*)(?!\*\*\*)('(?:[^'\\]|\\.)*'|[^\s'\"]+)")


class UrlError(ValueError):
    """A database URL that would be read in more than one way (its password could leak)."""


def hide_passwords(text: str) -> str:
    """The text with every password in it shown as ***: a URL's user-info password (up to the
    URL's last @, whatever it holds: / ? : % or further @), its password query parameters
    (percent-encoded names too) and libpq keyword passwords. Malformed URLs are masked the same
    way; nothing here parses a URL strictly, so nothing here fails."""
    return _KEYWORD.sub(lambda m: m.group(1) + MASK, _URL.sub(lambda m: _mask_url(m[0]), text))


def hide_password_in_argument(argument: str) -> str:
    """One command-line argument, masked as a whole: a URL in it runs to the argument's end,
    blanks and quotes included (a shell-quoted password may hold both)."""
    start = _URL.search(argument)
    if start is None:
        return hide_passwords(argument)
    head = argument[: start.start()]
    return hide_passwords(head) + _KEYWORD.sub(
        lambda m: m.group(1) + MASK, _mask_url(argument[start.start() :])
    )


def masked_command(argv: Iterable[str]) -> str:
    """A command line as `runs.command` keeps it: shell-quoted, each argument masked whole."""
    return shlex.join(hide_password_in_argument(str(arg)) for arg in argv)


def _mask_url(url: str) -> str:
    scheme, _, rest = url.partition("://")
    at = rest.rfind("@")
    if at >= 0:
        userinfo, rest = rest[:at], rest[at:]
        user, colon, _password = userinfo.partition(":")
        if colon:
            userinfo = f"{user}:{MASK}"
        elif "@" in userinfo:  # no colon, several @: which part is secret is not sure
            userinfo = MASK
        rest = userinfo + rest
    head, question, query = rest.partition("?")
    if question:
        query = "&".join(_mask_parameter(part) for part in query.split("&"))
    return f"{scheme}://{head}{question}{query}"


def _mask_parameter(part: str) -> str:
    key, equals, value = part.partition("=")
    if equals and unquote(key).strip().lower() in _SECRET_KEYS:
        # Masked already (a message quoting a masked URL): what follows *** is the message's.
        return part if value.startswith(MASK) else f"{key}={MASK}"
    return part


def check_url(url: str) -> None:
    """Refuse, before any driver sees it, a URL whose password may be read as a host name: an
    unescaped @ after the user-info's own (SQLAlchemy ends the password at the first @, and
    libpq then looks up the rest as a host and names it in its error)."""
    _scheme, separator, rest = url.partition("://")
    if not separator:
        return
    first = rest.find("@")
    if first < 0:
        return
    authority = re.split(r"[/?]", rest[first + 1 :], maxsplit=1)[0]
    if "@" in authority:
        raise UrlError(
            "more than one '@' before the host; write an '@' in a user name or password as %40"
        )


__all__ = [
    "MASK",
    "UrlError",
    "check_url",
    "hide_password_in_argument",
    "hide_passwords",
    "masked_command",
]
