"""The SQLite checkpoint of ``run_many``: finished items survive a crash or Ctrl-C.

One file holds one run: a fingerprint of the function (``meta``) and one row per successful item
(its index, a digest of the item, the pickled value and its usage). A re-run with the same file
reads the rows in index order next to the items and skips every item already done; a failed item
has no row, so it runs again. A file written for another function, or whose finished items are not
the items given now, is refused with ``BatchError`` (the fingerprint rule), never mixed.

Each finished item is committed on its own, by the worker that ran it, before the item is handed
back (and before that worker takes the next item): a process killed at any moment (``kill -9``,
out of memory) loses no item whose call had returned, so no finished item is paid for twice. The
file runs in WAL mode with ``synchronous=NORMAL``: a commit survives the process dying; only a
power cut or an operating-system crash may lose the last few commits (those items run again).

Values are stored with ``pickle``: a checkpoint file is trusted like code, keep it where only you
can write.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import json
import pickle
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from chatclient.errors import BatchError, CheckpointError
from chatclient.models.base import Usage

__all__ = ["Checkpoint", "function_fingerprint", "item_digest"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    idx INTEGER PRIMARY KEY,
    digest BLOB NOT NULL,
    value BLOB NOT NULL,
    usage TEXT
);
"""


_PLAIN = (str, bytes, int, float, complex, bool, type(None))


def _value_digest(value: Any, depth: int) -> bytes:
    """What a captured value contributes to a fingerprint.

    Immutable values (strings, numbers, tuples and frozensets of them) count by value, a function by
    its own fingerprint, a class by its name. Anything else (a list the function appends to, a
    client, a lock) counts by its type only: its content may change between runs without the
    function changing, and refusing the checkpoint then would be wrong.
    """
    if isinstance(value, _PLAIN):
        return repr(value).encode()
    if isinstance(value, tuple | frozenset) and depth < 4:
        items = sorted(_value_digest(v, depth + 1) for v in value) if isinstance(value, frozenset) else value
        return b"(" + b",".join(v if isinstance(v, bytes) else _value_digest(v, depth + 1) for v in items) + b")"
    if (inspect.isfunction(value) or isinstance(value, functools.partial)) and depth < 4:
        return function_fingerprint(value, _depth=depth + 1).encode()
    if isinstance(value, type):
        return f"class {value.__module__}.{value.__qualname__}".encode()
    return f"{type(value).__module__}.{type(value).__qualname__}".encode()


def function_fingerprint(fn: Callable[..., Any], *, _depth: int = 0) -> str:
    """A digest of what ``fn`` is: its qualified name and, for Python functions, its code, constants,
    default arguments and the immutable values its closure captured (so two closures made by one
    factory with different strings or numbers differ). A mutable captured object counts by its type
    only; when that is not enough, give the checkpoint a ``key=`` naming the function's version."""
    target: Any = fn
    parts: list[bytes] = []
    # functools.partial: the function and its bound arguments
    while hasattr(target, "func") and hasattr(target, "args"):
        parts.append(repr((target.args, sorted((target.keywords or {}).items()))).encode())
        target = target.func
    code = getattr(target, "__code__", None)
    if code is None:
        call = getattr(type(target), "__call__", None)  # noqa: B004 - the method itself, for its code
        code = getattr(call, "__code__", None)
        name = f"{type(target).__module__}.{type(target).__qualname__}"
    else:
        name = f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"
    parts.append(name.encode())
    if code is not None:
        parts.append(code.co_code)
        parts.append(repr([c for c in code.co_consts if not hasattr(c, "co_code")]).encode())
        parts.append(repr(code.co_names).encode())
    for cell in getattr(target, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue
        parts.append(_value_digest(value, _depth))
    parts.append(_value_digest(getattr(target, "__defaults__", None) or (), _depth))
    kwdefaults = getattr(target, "__kwdefaults__", None) or {}
    parts.append(_value_digest(tuple(sorted(kwdefaults.items())), _depth))
    return hashlib.blake2b(b"\0".join(parts), digest_size=16).hexdigest()


def item_digest(item: Any) -> bytes:
    """Eight bytes that tell one item from another (its pickle, else its ``repr``)."""
    try:
        data = pickle.dumps(item, protocol=5)
    except Exception:
        data = repr(item).encode("utf-8", "replace")
    return hashlib.blake2b(data, digest_size=8).digest()


def _usage_json(usage: Usage | None) -> str | None:
    if usage is None:
        return None
    return json.dumps(
        [
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.cached_input_tokens,
            usage.cache_write_tokens,
            usage.reasoning_tokens,
            usage.reported_total_tokens,
        ]
    )


def _usage_of(text: str | None) -> Usage | None:
    if text is None:
        return None
    fields = json.loads(text)
    if not isinstance(fields, list) or len(fields) > 6 or not all(isinstance(f, int | None) for f in fields):
        raise ValueError("a usage row of the wrong shape")
    return Usage(*fields)


class Checkpoint:
    """One run's checkpoint file. ``open`` checks the fingerprint; ``done()`` streams the finished rows."""

    def __init__(self, path: str | Path, *, key: str | None = None) -> None:
        if isinstance(path, sqlite3.Connection):
            raise TypeError("checkpoint= takes a file path (str or Path), not an open sqlite3 connection")
        if key is not None and (not isinstance(key, str) or not key.strip()):
            raise ValueError(f"key= names the function's version for the checkpoint (a non-empty str), got {key!r}")
        self.path = Path(path)
        # a name the caller gives the function's version; replaces the computed fingerprint
        self.key = key
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # workers of one run write through the one connection

    def __repr__(self) -> str:
        return f"Checkpoint({str(self.path)!r})"

    def open(self, fingerprint: str) -> None:
        """Create or reopen the file; refuse one written for another function."""
        if self.path.parent and not self.path.parent.exists():
            raise ValueError(f"checkpoint directory {str(self.path.parent)!r} does not exist; create it first")
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            row = db.execute("SELECT value FROM meta WHERE key = 'fingerprint'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise CheckpointError(
                f"cannot use {str(self.path)!r} as a checkpoint ({exc}); pass the path of a new file "
                "or of a checkpoint written by run_many",
                path=str(self.path),
            ) from exc
        if row is None:
            db.execute("INSERT INTO meta (key, value) VALUES ('fingerprint', ?)", (fingerprint,))
        elif row[0] != fingerprint:
            db.close()
            raise BatchError(
                f"checkpoint {str(self.path)!r} belongs to another function (fingerprint {row[0]}, this run "
                f"{fingerprint}); pass a new checkpoint path, or delete the file to start over"
            )
        self._db = db

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("the checkpoint is not open")
        return self._db

    def done(self) -> Iterator[tuple[int, bytes, Any, Usage | None]]:
        """The finished items, by index: (index, digest, value, usage). Reads on its own connection.

        A row that does not read back (a damaged file, a value whose class is gone) is a
        ``CheckpointError`` naming the file and the item, never a bare unpickling error.
        """
        reader = sqlite3.connect(self.path, check_same_thread=False)
        idx: Any = None
        try:
            for idx, digest, value, usage in reader.execute("SELECT idx, digest, value, usage FROM items ORDER BY idx"):
                if not isinstance(idx, int) or not isinstance(digest, bytes) or not isinstance(value, bytes):
                    raise TypeError("a row of the wrong shape")
                yield idx, digest, pickle.loads(value), _usage_of(usage)
        except Exception as exc:
            if isinstance(exc, BatchError):
                raise
            where = f" at item {idx}" if isinstance(idx, int) else ""
            raise CheckpointError(
                f"checkpoint {str(self.path)!r} is damaged{where} ({type(exc).__name__}); nothing was run. Move "
                "the file away (or pass a new checkpoint path) to start over",
                path=str(self.path),
            ) from None
        finally:
            reader.close()

    @staticmethod
    def saved(path: str | Path) -> int:
        """How many items the checkpoint file at ``path`` holds (0 when it cannot be read)."""
        try:
            # closing(): a sqlite3 connection's own ``with`` ends a transaction but leaves it open
            with contextlib.closing(sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)) as reader:
                row = reader.execute("SELECT count(*) FROM items").fetchone()
        except sqlite3.Error:
            return 0
        return int(row[0])

    def count(self) -> int:
        """How many items are finished."""
        with self._lock:
            row = self._conn().execute("SELECT count(*) FROM items").fetchone()
        return int(row[0])

    def add(self, index: int, digest: bytes, value: Any, usage: Usage | None) -> None:
        """Record one successful item, committed before this returns (safe from several threads)."""
        try:
            blob = pickle.dumps(value, protocol=5)
        except Exception as exc:
            raise BatchError(
                f"item {index}: its result ({type(value).__name__}) cannot be pickled into the checkpoint ({exc}); "
                "return plain data (str, dict, a pydantic model) from fn, or run without checkpoint="
            ) from exc
        with self._lock:
            # autocommit mode (isolation_level=None): the statement is its own committed transaction
            self._conn().execute(
                "INSERT OR REPLACE INTO items (idx, digest, value, usage) VALUES (?, ?, ?, ?)",
                (index, digest, blob, _usage_json(usage)),
            )

    def close(self) -> None:
        """Close the file (safe to call twice; every added item is already committed)."""
        with self._lock:
            if self._db is None:
                return
            db, self._db = self._db, None
            db.close()
