"""Writes sample.pdf: a tiny PDF (4 pages, page 3 blank) built by hand, with a title in its info.

Run from the repository root: ``python tests/data/rag/make_pdf.py``. No PDF library is needed;
the file lists its objects and a cross-reference table with their byte offsets.
"""

from __future__ import annotations

from pathlib import Path

PAGES = [
    ["Chatclient ingestion manual", "Page one explains readers.", "The PDF reader keeps page numbers."],
    ["Splitting happens after reading.", "Chunks are embedded in batches."],
    [],
    ["The pipeline is idempotent.", "Content hashes become document ids."],
]


def _stream(lines: list[str]) -> bytes:
    ops = ["BT", "/F1 14 Tf", "72 720 Td", "18 TL"]
    for line in lines:
        escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        ops.append(f"({escaped}) Tj T*")
    ops.append("ET")
    return "\n".join(ops).encode("latin-1")


def build(pages: list[list[str]], title: str = "Ingestion Manual") -> bytes:
    objects: list[bytes] = []
    n = len(pages)
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, lines in enumerate(pages):
        content = 5 + 2 * i
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {content} 0 R >>".encode()
        )
        body = _stream(lines)
        objects.append(b"<< /Length %d >>\nstream\n" % len(body) + body + b"\nendstream")
    objects.append(f"<< /Title ({title}) /Producer (make_pdf.py) >>".encode())
    info = len(objects)
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        info,
        xref,
    )
    return bytes(out)


if __name__ == "__main__":
    target = Path(__file__).with_name("sample.pdf")
    target.write_bytes(build(PAGES))
    print(f"wrote {target} ({target.stat().st_size} bytes)")
