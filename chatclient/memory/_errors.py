"""One way for every memory repository to report a failing store: ``ChatMemoryError``.

The drivers (psycopg, redis-py, sqlite3) raise their own exceptions, and their messages may echo a
connection string. Each repository builds one :class:`StoreErrors` describing its store and runs
every operation inside :meth:`StoreErrors.operation`, which turns a driver exception into a
``ChatMemoryError`` (a ``ChatMemoryTimeoutError`` for timeouts and locks) whose message names the
store, the operation and what to check, with passwords and URL userinfo removed. Anything else
(``ValueError``/``TypeError`` for bad input or a damaged row) passes through untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from urllib.parse import unquote, urlsplit

from chatclient.errors import ChatMemoryError, ChatMemoryTimeoutError
from chatclient.redaction import REDACTED, scrub

# The ``user:password@`` after any ``://`` in a text: the whole userinfo goes, whatever it holds.
# Anchored on ``://`` (not on the scheme's letters) so a long run of letters costs linear time.
_URL_USERINFO = re.compile(r"://[^/@\s\"']*@")
# ``password=...`` in a libpq key/value string or a URL query, quoted or not.
_PASSWORD_SETTING = re.compile(r"(?P<key>\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s&'\"]+)", re.IGNORECASE)
_MAX_REASON = 300


def connection_secrets(target: str) -> list[str]:
    """The passwords a DSN or URL carries (userinfo or ``password=``), decoded and as written."""
    found: list[str] = []
    if "://" in target:
        try:
            parts = urlsplit(target)
            if parts.password:
                found += [parts.password, unquote(parts.password)]
        except ValueError:  # an unparsable URL still goes through the patterns below
            pass
    for match in _PASSWORD_SETTING.finditer(target):
        value = match.group(0)[len(match.group("key")) :].strip("'")
        found += [value, unquote(value)]
    return [s for s in found if s]


def scrub_text(text: str, secrets: Sequence[str]) -> str:
    """``text`` with URL userinfo, ``password=`` values and every form of ``secrets`` removed."""

    text = _URL_USERINFO.sub("://", text)
    text = _PASSWORD_SETTING.sub(lambda m: m.group("key") + REDACTED, text)
    return scrub(text, [s for s in secrets if s])


class StoreErrors:
    """How one repository turns its driver's exceptions into ``ChatMemoryError``.

    ``store`` names the store ("PostgreSQL"), ``where`` the place it was looked for (host and port,
    or a path; never with credentials), ``check`` what the user should check (it may use
    ``{where}``). ``driver_errors`` are the exceptions to convert; those for which ``is_timeout``
    is true become ``ChatMemoryTimeoutError``. ``secrets`` are scrubbed from every message.
    """

    def __init__(
        self,
        store: str,
        *,
        where: str,
        check: str,
        driver_errors: tuple[type[BaseException], ...],
        is_timeout: Callable[[BaseException], bool] = lambda exc: False,
        secrets: Sequence[str] = (),
    ) -> None:
        self.store = store
        self.where = scrub_text(where, secrets)
        self.check = check.format(where=self.where)
        self.driver_errors = driver_errors
        self.is_timeout = is_timeout
        self.secrets = tuple(s for s in secrets if s)

    def error(self, operation: str, reason: str, *, timeout: bool = False) -> ChatMemoryError:
        """The error for ``operation`` failing because of ``reason`` (scrubbed here)."""
        reason = " ".join(scrub_text(reason, self.secrets).split())[:_MAX_REASON] or "no reason given"
        kind = ChatMemoryTimeoutError if timeout else ChatMemoryError
        return kind(
            f"{self.store} chat memory: {operation} failed at {self.where}: {reason} - {self.check}",
            store=self.store,
        )

    @contextmanager
    def operation(self, name: str) -> Iterator[None]:
        """Run the body of operation ``name``; a driver exception leaves it as ``ChatMemoryError``."""
        try:
            yield
        except self.driver_errors as exc:
            text = str(exc)
            error = self.error(name, f"{type(exc).__name__}: {text}", timeout=self.is_timeout(exc))
            if scrub_text(text, self.secrets) != text:
                # The driver's own message carries a credential: do not chain it, or every
                # traceback and log record of this error would print it again.
                raise error from None
            raise error from exc
