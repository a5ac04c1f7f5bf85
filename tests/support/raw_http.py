"""Raw HTTP pieces for testing chatclient's own HTTP/1.1 lanes against bytes a server really sends.

Bare TCP (and TLS) servers whose answers a test writes byte for byte, the compressed bodies and a
self-signed certificate: shared by the sync and async lane tests.
"""

from __future__ import annotations

import datetime
import gzip
import ipaddress
import json
import socket
import ssl
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.loopback import openai_completion


def gz(payload: Any) -> bytes:
    return gzip.compress(json.dumps(payload).encode())


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def read_request(conn: socket.socket) -> bytes | None:
    """One whole request (head and body) from ``conn``; ``None`` if the client closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        got = conn.recv(65536)
        if not got:
            return None
        data += got
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")), 0
    )
    while len(body) < length:
        got = conn.recv(65536)
        if not got:
            return None
        body += got
    return head


ANSWER = json.dumps(openai_completion("raw")).encode()


OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(ANSWER), ANSWER)


@contextmanager
def raw_server(
    serve: Callable[[socket.socket, list[bytes]], None], tls: ssl.SSLContext | None = None
) -> Iterator[tuple[str, list[bytes]]]:
    """A bare TCP server: ``serve(conn, heads)`` runs for each connection (request heads go in ``heads``).

    With ``tls`` (a server context) connections are wrapped first and the URL is ``https://``.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    heads: list[bytes] = []
    stop = threading.Event()
    workers: list[threading.Thread] = []

    def handle(conn: socket.socket) -> None:
        conn.settimeout(5.0)
        try:
            if tls is not None:
                conn = tls.wrap_socket(conn, server_side=True)
            with conn:
                serve(conn, heads)
        except OSError:  # a client that refuses the certificate, or hangs up, ends its connection
            conn.close()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            worker = threading.Thread(target=handle, args=(conn,), daemon=True)
            workers.append(worker)
            worker.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        scheme = "https" if tls is not None else "http"
        yield f"{scheme}://127.0.0.1:{listener.getsockname()[1]}", heads
    finally:
        stop.set()
        acceptor.join(5.0)
        listener.close()
        for worker in workers:
            worker.join(5.0)


def header_lines(head: bytes) -> list[tuple[str, str]]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return [(name.strip().lower(), value.strip()) for name, _, value in (line.partition(":") for line in lines)]


def answer_with(raw: bytes) -> Callable[[socket.socket, list[bytes]], None]:
    """Answers one request with ``raw`` bytes, then closes the connection."""

    def serve(conn: socket.socket, heads: list[bytes]) -> None:
        head = read_request(conn)
        if head is not None:
            heads.append(head)
            conn.sendall(raw)

    return serve


def self_signed(directory: Path, names: list[str], ips: list[str]) -> tuple[Path, Path]:
    """A self-signed certificate (its own CA) for ``names``/``ips``: (certificate, key) files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "chatclient test")])
    now = datetime.datetime.now(datetime.UTC)
    alt = [x509.DNSName(n) for n in names] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


def certificates_fixture() -> Callable[..., Any]:
    """The module-scoped ``certificates`` fixture: ``certificates = certificates_fixture()`` in a test module.

    It gives a certificate valid for 127.0.0.1, and one for another host name only.
    """

    @pytest.fixture(scope="module")
    def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
        return {
            "good": self_signed(tmp_path_factory.mktemp("good"), ["localhost"], ["127.0.0.1"]),
            "wrong-host": self_signed(tmp_path_factory.mktemp("wrong"), ["elsewhere.test"], []),
        }

    return certificates


def server_context(files: tuple[Path, Path]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*files)
    return context


def keep_alive(conn: socket.socket, heads: list[bytes]) -> None:
    """Answers every request on the connection until the client closes it."""
    while (head := read_request(conn)) is not None:
        heads.append(head)
        conn.sendall(OK)
