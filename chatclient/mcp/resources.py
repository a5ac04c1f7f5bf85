"""MCP resources as ``Document``s: reading, URI templates and an ETL reader."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from chatclient.mcp._sdk import types
from chatclient.rag.documents import Document


class ResourceSource(Protocol):
    """What ``McpResourceReader`` needs of a client (``McpClient`` is one): listing and reading resources."""

    def list_resources(self) -> Sequence[Any]: ...

    def read_resource(self, uri: str, /, **values: Any) -> list[Document]: ...

    async def alist_resources(self) -> Sequence[Any]: ...

    async def aread_resource(self, uri: str, /, **values: Any) -> list[Document]: ...

MAX_RESOURCE_CHARS = 5_000_000
"""A text resource longer than this is cut (with a warning): documents feed prompts and embeddings."""

_TEXT_MIME_PREFIXES = ("text/", "application/json", "application/xml", "application/yaml", "application/x-yaml")
_log = logging.getLogger("chatclient.mcp")


def expand_uri(template: str, values: Mapping[str, Any]) -> str:
    """Fill an RFC 6570 URI template (``notes://{topic}``) with ``values``; unknown or missing names raise ``ValueError``."""
    from mcp.shared.uri_template import UriTemplate

    parsed = UriTemplate.parse(template)
    names = set(parsed.variable_names)
    unknown = sorted(set(values) - names)
    missing = sorted(names - set(values))
    if unknown or missing:
        raise ValueError(
            f"URI template {template!r} takes {', '.join(sorted(names)) or 'no values'}"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; unknown: {', '.join(unknown)}" if unknown else "")
        )
    return parsed.expand({k: str(v) for k, v in values.items()})


def to_documents(result: types.ReadResourceResult, *, server: str | None = None) -> list[Document]:
    """One ``Document`` per text content of a ``resources/read`` result.

    Binary contents become documents only when their MIME type is textual (decoded as UTF-8);
    other binary contents (images, PDFs) are skipped with a warning, since a document is text.
    Metadata: ``source`` (the content's URI), ``mime_type`` and ``server`` when known.
    """
    from chatclient.mcp._blobs import decode_blob

    documents: list[Document] = []
    for content in result.contents:
        if isinstance(content, types.TextResourceContents):
            text = content.text
        elif content.mime_type and content.mime_type.startswith(_TEXT_MIME_PREFIXES):
            text = decode_blob(content.blob, MAX_RESOURCE_CHARS * 4).decode("utf-8", errors="replace")
        else:
            _log.warning("skipped binary MCP resource %s (%s): documents hold text", content.uri, content.mime_type)
            continue
        if len(text) > MAX_RESOURCE_CHARS:
            _log.warning("MCP resource %s cut from %d to %d characters", content.uri, len(text), MAX_RESOURCE_CHARS)
            text = text[:MAX_RESOURCE_CHARS]
        metadata: dict[str, Any] = {"source": str(content.uri)}
        if content.mime_type:
            metadata["mime_type"] = content.mime_type
        if server:
            metadata["server"] = server
        documents.append(Document(text, metadata))
    return documents


class McpResourceReader:
    """An ETL ``DocumentReader`` over an MCP server's resources.

    ``uris`` picks resources (templates are filled from ``template_values``); without it every
    listed resource is read. Use it like any reader: ``DocumentPipeline(McpResourceReader(client),
    [TokenTextSplitter()], vector_store).run()``.
    """

    def __init__(
        self,
        client: ResourceSource,
        uris: Sequence[str] | None = None,
        *,
        template_values: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(uris, str):
            raise TypeError("uris must be a sequence of URIs, not one string: McpResourceReader(client, [uri])")
        self.client = client
        self.uris = tuple(uris) if uris is not None else None
        self.template_values = dict(template_values or {})

    def read(self) -> list[Document]:
        """The documents of the chosen (or all listed) resources."""
        uris = self.uris if self.uris is not None else tuple(str(r.uri) for r in self.client.list_resources())
        documents: list[Document] = []
        for uri in uris:
            documents.extend(self.client.read_resource(uri, **self._values_for(uri)))
        return documents

    async def aread(self) -> list[Document]:
        """Async twin of ``read``."""
        uris = self.uris if self.uris is not None else tuple(str(r.uri) for r in await self.client.alist_resources())
        documents: list[Document] = []
        for uri in uris:
            documents.extend(await self.client.aread_resource(uri, **self._values_for(uri)))
        return documents

    def _values_for(self, uri: str) -> dict[str, Any]:
        if "{" not in uri:
            return {}
        from mcp.shared.uri_template import UriTemplate

        names = set(UriTemplate.parse(uri).variable_names)
        return {k: v for k, v in self.template_values.items() if k in names}

    __call__ = read


__all__ = ["MAX_RESOURCE_CHARS", "McpResourceReader", "expand_uri", "to_documents"]
