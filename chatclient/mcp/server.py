"""``serve()``: expose ``@tool`` functions, documents and prompt functions as an MCP server.

Tools keep the schemas they give to models (the same ``ToolDefinition``), so a client sees
exactly what a local model would; ``ToolContext`` parameters stay hidden and receive a context
holding the MCP request (``mcp_server_context(ctx)``: log, progress, elicit, sample). A ``ChatClient`` in ``tools`` becomes an ``ask`` tool (see ``chat_client_tool``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from chatclient.asgi_guard import HostOriginGuard, call_auth, guarded
from chatclient.errors import McpError, ToolError
from chatclient.mcp._sdk import MCPError, types
from chatclient.mcp.serving import (
    CONTEXT_KEY,
    LOG_LEVELS,
    CompletionSource,
    EmbeddedResource,
    McpServerContext,
    ResourceChanges,
    _LogLevels,
    choices_of,
    complete_values,
    connection_of,
)
from chatclient.messages import AssistantMessage, Media, Message, UserMessage
from chatclient.tools.callback import FunctionToolCallback, ToolCallback
from chatclient.tools.context import ToolContext
from chatclient.tools.decorator import resolve_tools
from chatclient.tools.results import ToolResult

_log = logging.getLogger("chatclient.mcp")

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server

    from chatclient.client import ChatClient
    from chatclient.mcp.oauth import ProtectedResource
    from chatclient.rag.documents import Document

PromptFunction = Callable[..., "str | Sequence[Message]"]

AuthHook = Callable[[Any], "bool | Awaitable[bool]"]
"""``auth(request) -> bool`` (sync or async): gets every HTTP request (a Starlette ``Request``) before
the MCP transport does; ``False`` (anything but ``True``) answers 401. Check a bearer token or a client
certificate here."""


def chat_client_tool(
    chat_client: ChatClient,
    *,
    name: str = "ask",
    description: str = "Ask a question; an assistant answers it in plain text.",
) -> FunctionToolCallback:
    """A ``ChatClient`` as a tool taking one ``question`` (e.g. "ask the documentation" backed by a QA advisor).

    >>> from chatclient import ChatClient
    >>> from chatclient.testing import ScriptedChatModel
    >>> ask = chat_client_tool(ChatClient.create(ScriptedChatModel(["42"])), name="ask_docs")
    >>> ask.call('{"question": "answer?"}')
    '42'
    """

    async def ask(question: str) -> str:
        answer = await chat_client.prompt(question).acall().content()
        return answer or ""

    ask.__doc__ = f"""{description}

    Args:
        question: The question, in plain words.
    """
    return FunctionToolCallback(ask, name=name, description=description)


def _tool_callbacks(tools: Sequence[Any]) -> list[ToolCallback]:
    from chatclient.client import ChatClient

    items = [chat_client_tool(t) if isinstance(t, ChatClient) else t for t in tools]
    return resolve_tools(items)


def _split_resources(
    resources: Mapping[str, Any] | Sequence[Document],
) -> tuple[dict[str, Any], dict[str, Any]]:
    from chatclient.rag.documents import Document

    fixed: dict[str, Any] = {}
    templated: dict[str, Any] = {}
    if isinstance(resources, Mapping):
        entries = list(resources.items())
    else:
        entries = []
        for doc in resources:
            if not isinstance(doc, Document):
                raise TypeError(f"resources takes Documents or a mapping of URI to content, not {type(doc).__name__}")
            entries.append((str(doc.metadata.get("uri") or f"doc://{doc.id}"), doc))
    for uri, source in entries:
        if not isinstance(uri, str) or "://" not in uri:
            raise ValueError(f"resource URI {uri!r} needs a scheme, e.g. 'notes://{uri}'")
        if "{" in uri:
            if not callable(source):
                raise TypeError(f"templated resource {uri!r} needs a function taking the template's values")
            templated[uri] = source
        else:
            fixed[uri] = source
    return fixed, templated


def _description(obj: Any) -> str | None:
    doc = inspect.getdoc(obj)
    return doc.strip().split("\n\n")[0] if doc else None


async def _resolve_content(source: Any, values: Mapping[str, Any]) -> str | Media:
    """A resource's content: text, or ``Media`` (bytes with a MIME type) for binary resources."""
    from chatclient.rag.documents import Document

    if isinstance(source, Document):
        return source.text
    if isinstance(source, (str, Media)):
        return source
    result = source(**values)
    if inspect.isawaitable(result):
        result = await result
    if isinstance(result, Document):
        return result.text
    if not isinstance(result, (str, Media)):
        raise TypeError(f"a resource function returned {type(result).__name__}, not str or Media")
    return result


def _resource_contents(uri: str, content: str | Media) -> Any:
    """``TextResourceContents`` for text, ``BlobResourceContents`` (base64) for bytes."""
    import base64

    if isinstance(content, str):
        return types.TextResourceContents(uri=uri, mime_type="text/plain", text=content)
    if isinstance(content.data, str) or _is_textual(content.mime_type):
        text = content.data if isinstance(content.data, str) else content.data.decode("utf-8", "replace")
        return types.TextResourceContents(uri=uri, mime_type=content.mime_type, text=text)
    blob = base64.b64encode(content.data).decode("ascii")
    return types.BlobResourceContents(uri=uri, mime_type=content.mime_type, blob=blob)


def _is_textual(mime: str) -> bool:
    mime = mime.lower().split(";")[0].strip()
    return mime.startswith("text/") or mime.endswith(("/json", "+json", "/xml", "+xml"))


def _media_content(media: Media) -> Any:
    """One ``Media`` as MCP content: image, audio, an embedded resource, or (for a URL) a resource link."""
    import base64

    mime = media.mime_type.lower()
    if isinstance(media, EmbeddedResource):
        return types.EmbeddedResource(resource=_resource_contents(media.uri, media))
    if isinstance(media.data, bytes) and mime.startswith(("image/", "audio/")):
        data = base64.b64encode(media.data).decode("ascii")
        kind = types.ImageContent if mime.startswith("image/") else types.AudioContent
        return kind(data=data, mime_type=media.mime_type)
    if isinstance(media.data, str) and "://" in media.data:
        name = media.data.rsplit("/", 1)[-1] or media.data
        return types.ResourceLink(uri=media.data, name=name, mime_type=media.mime_type)
    if isinstance(media.data, str):
        return types.TextContent(text=f"[{media.mime_type}: {media.data}]")
    return types.TextContent(text=f"[{media.mime_type} attachment, {len(media.data)} bytes]")


def _prompt_arguments(fn: Callable[..., Any]) -> list[types.PromptArgument]:
    arguments = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        arguments.append(types.PromptArgument(name=param.name, required=param.default is param.empty))
    return arguments


def _prompt_messages(result: Any) -> list[types.PromptMessage]:
    if isinstance(result, str):
        return [types.PromptMessage(role="user", content=types.TextContent(text=result))]
    messages = []
    for message in result:
        if isinstance(message, AssistantMessage):
            role: Literal["user", "assistant"] = "assistant"
        elif isinstance(message, (UserMessage,)) or hasattr(message, "text"):
            role = "user"  # MCP prompts have no system role: instructions travel as user text
        else:
            raise TypeError(f"a prompt function returned {type(message).__name__} in its messages")
        media = getattr(message, "media", ()) if isinstance(message, UserMessage) else ()
        if message.text or not media:
            messages.append(types.PromptMessage(role=role, content=types.TextContent(text=message.text or "")))
        # a prompt message holds one content block: each image or embedded resource is a message of its own
        messages.extend(types.PromptMessage(role=role, content=_media_content(m)) for m in media)
    return messages


def _result_content(result: str | ToolResult) -> list[Any]:
    """MCP content for a tool's result: its text, then its images and audio (other media as links)."""
    if not isinstance(result, ToolResult):
        return [types.TextContent(text=result)]
    content: list[Any] = [types.TextContent(text=result.text)] if result.text or not result.media else []
    content.extend(_media_content(media) for media in result.media)
    return content


def build_server(
    tools: Sequence[Any] = (),
    resources: Mapping[str, Any] | Sequence[Document] = (),
    prompts: Mapping[str, PromptFunction] | Sequence[PromptFunction] = (),
    *,
    name: str = "chatclient",
    instructions: str | None = None,
    completions: Mapping[str, Mapping[str, CompletionSource]] | None = None,
    resource_changes: ResourceChanges | None = None,
) -> Server[Any]:
    """The SDK's low-level ``Server`` with handlers for the given tools, resources and prompts (not started).

    ``tools``: ``@tool`` functions (sync or async), objects with ``@tool`` methods, ``ToolCallback``s,
    ``ChatClient``s. ``resources``: ``Document``s (URI ``metadata["uri"]`` or ``doc://<id>``), or a
    mapping of URI to text, ``Document`` or function; a URI with ``{name}`` parts is a template whose
    function receives the values. ``prompts``: functions (name = function name) or a mapping of
    name to function; parameters are the prompt's arguments (required when they have no default),
    the result a string (one user message) or a list of messages.

    ``completions`` maps a prompt name or a template URI to ``{argument: values}``, the values a list
    (prefix-filtered) or ``fn(value, context) -> list`` (sync or async); arguments annotated
    ``Literal[...]`` or with an ``Enum`` complete from their choices without it. ``resource_changes``
    turns on ``resources/subscribe``: call ``resource_changes.changed(uri)`` when a resource changes.
    The server always offers ``logging/setLevel``; tools log and report progress through
    ``mcp_server_context(ctx)``.
    """
    from mcp.server.lowlevel.server import Server
    from mcp.shared.uri_template import UriTemplate

    callbacks = {cb.definition.name: cb for cb in _tool_callbacks(tools)}
    fixed, templated = _split_resources(resources)
    matchers = [(UriTemplate.parse(uri), uri, fn) for uri, fn in templated.items()]
    prompt_fns = dict(prompts) if isinstance(prompts, Mapping) else {getattr(fn, "__name__", ""): fn for fn in prompts}
    for key, fn in prompt_fns.items():
        if not key or not callable(fn):
            raise TypeError(f"prompts takes named functions, got {fn!r}")

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=cb.definition.name,
                    description=cb.definition.description,
                    input_schema=dict(cb.definition.input_schema),
                )
                for cb in callbacks.values()
            ]
        )

    log_levels = _LogLevels()
    completion_sources = _completion_sources(prompt_fns, matchers, completions or {})

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        cb = callbacks.get(params.name)
        if cb is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}; available: {', '.join(callbacks)}")
        arguments = json.dumps(params.arguments or {})
        limit = getattr(cb, "timeout", None)  # @tool(timeout=...) holds here too
        served = McpServerContext(ctx.session, ctx.request_id, log_levels, asyncio.get_running_loop())
        tool_context = ToolContext({CONTEXT_KEY: served})
        try:
            if isinstance(limit, (int, float)) and limit > 0:
                text = await asyncio.wait_for(cb.acall(arguments, tool_context), limit)
            else:
                text = await cb.acall(arguments, tool_context)
        except TimeoutError:
            message = f"tool {params.name!r} did not finish within its timeout of {limit} s"
            return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)
        except ToolError as exc:
            return types.CallToolResult(content=[types.TextContent(text=str(exc))], is_error=True)
        return types.CallToolResult(content=_result_content(text))

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        listed = []
        for uri, source in fixed.items():
            title = getattr(source, "metadata", {}).get("title") if not isinstance(source, str) else None
            listed.append(
                types.Resource(
                    uri=uri,
                    name=str(title or uri),
                    mime_type="text/plain",
                    description=_description(source) if callable(source) else None,
                )
            )
        return types.ListResourcesResult(resources=listed)

    async def list_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=uri, name=getattr(fn, "__name__", uri), description=_description(fn)
                )
                for _, uri, fn in matchers
            ]
        )

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        if uri in fixed:
            content = await _resolve_content(fixed[uri], {})
        else:
            for template, _, fn in matchers:
                values = template.match(uri)
                if values is not None:
                    content = await _resolve_content(fn, values)
                    break
            else:
                raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri!r}")
        return types.ReadResourceResult(contents=[_resource_contents(uri, content)])

    async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        if params.level not in LOG_LEVELS:
            raise MCPError(types.INVALID_PARAMS, f"unknown log level {params.level!r}")
        log_levels.set(connection_of(ctx.session), params.level)
        return types.EmptyResult()

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        ref = params.ref
        key = getattr(ref, "name", None) if ref.type == "ref/prompt" else getattr(ref, "uri", None)
        source = completion_sources.get(str(key), {}).get(params.argument.name)
        if source is None:
            return types.CompleteResult(completion=types.Completion(values=[], total=0, has_more=False))
        context = dict(params.context.arguments or {}) if params.context is not None else {}
        try:
            values, total = await complete_values(source, params.argument.value, context)
        except Exception as exc:  # a broken completion function answers an error, not a dropped connection
            # Its kind only: the text may quote a backend's URL or key; the server's log has the rest.
            _log.warning("completing %r failed", params.argument.name, exc_info=True)
            raise MCPError(
                types.INTERNAL_ERROR, f"completing {params.argument.name!r} failed ({type(exc).__name__})"
            ) from exc
        return types.CompleteResult(
            completion=types.Completion(values=values, total=total, has_more=total > len(values))
        )

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        assert resource_changes is not None  # registered only with resource_changes
        uri = str(params.uri)
        if uri not in fixed and not any(t.match(uri) is not None for t, _, _ in matchers):
            raise MCPError(types.INVALID_PARAMS, f"unknown resource {uri!r}")
        try:
            resource_changes.subscribe(uri, ctx.session)
        except McpError as exc:
            raise MCPError(types.INVALID_REQUEST, str(exc)) from exc
        return types.EmptyResult()

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        assert resource_changes is not None
        resource_changes.unsubscribe(str(params.uri), ctx.session)
        return types.EmptyResult()

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(name=key, description=_description(fn), arguments=_prompt_arguments(fn))
                for key, fn in prompt_fns.items()
            ]
        )

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        fn = prompt_fns.get(params.name)
        if fn is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}")
        declared = {a.name for a in _prompt_arguments(fn)}
        given = dict(params.arguments or {})
        missing = [a.name for a in _prompt_arguments(fn) if a.required and a.name not in given]
        if missing or set(given) - declared:
            raise MCPError(types.INVALID_PARAMS, f"prompt {params.name!r} takes {', '.join(declared) or 'nothing'}")
        result = fn(**given)
        if inspect.isawaitable(result):
            result = await result
        return types.GetPromptResult(description=_description(fn), messages=_prompt_messages(result))

    handlers: dict[str, Any] = {}
    if callbacks:
        handlers.update(on_list_tools=list_tools, on_call_tool=call_tool)
    if fixed or matchers:
        handlers.update(
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
        )
        if resource_changes is not None:
            handlers.update(on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe)
    if prompt_fns:
        handlers.update(on_list_prompts=list_prompts, on_get_prompt=get_prompt)
    if prompt_fns or matchers:
        handlers.update(on_completion=complete)
    server: Server[Any] = Server(name, instructions=instructions, **handlers)
    # added after construction: the constructor's keyword warns that logging is deprecated in the
    # 2026-07-28 revision, but clients of the 2025 revisions still use it
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    return server


def _completion_sources(
    prompt_fns: Mapping[str, Callable[..., Any]],
    matchers: Sequence[tuple[Any, str, Callable[..., Any]]],
    completions: Mapping[str, Mapping[str, CompletionSource]],
) -> dict[str, dict[str, CompletionSource]]:
    """Per prompt name / template URI, the completion source of each argument: the given ones, then
    the choices of ``Literal`` / ``Enum`` annotated parameters."""
    known = set(prompt_fns) | {uri for _, uri, _ in matchers}
    unknown = set(completions) - known
    if unknown:
        raise ValueError(f"completions for unknown prompts or templates: {', '.join(sorted(unknown))}")
    sources: dict[str, dict[str, CompletionSource]] = {}
    for key, fn in [*prompt_fns.items(), *((uri, fn) for _, uri, fn in matchers)]:
        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # unresolvable annotations: no automatic choices
            hints = {}
        automatic: dict[str, CompletionSource] = {n: c for n, h in hints.items() if (c := choices_of(h))}
        sources[key] = {**automatic, **dict(completions.get(key, {}))}
    return sources


def _transport_settings() -> Any:
    """The SDK's own Host/Origin check, off: ``chatclient.asgi_guard`` checks every request before the
    SDK sees it (the SDK's copy would refuse names our gate lets in, e.g. ``allowed_hosts``)."""
    from mcp.server.transport_security import TransportSecuritySettings

    return TransportSecuritySettings(enable_dns_rebinding_protection=False)


def _yes_or_no(auth: AuthHook) -> Callable[[Any], Awaitable[bool | None]]:
    """MCP's ``auth`` hook answers yes or no: only ``True`` lets a request in (``None`` refuses it), as
    documented, so a hook returning some other truthy value by mistake does not open the server."""

    async def hook(request: Any) -> bool | None:
        return True if await call_auth(auth, request) is True else None

    return hook


def http_app(
    server: Server[Any],
    *,
    transport: Literal["http", "sse"] = "http",
    host: str = "127.0.0.1",
    path: str = "/mcp",
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    auth: AuthHook | None = None,
    protected_resource: ProtectedResource | None = None,
) -> Any:
    """The ASGI app ``serve`` runs for the HTTP transports, with DNS-rebinding protection.

    With ``protected_resource`` (OAuth: ``auth`` then checks the bearer token) the app publishes
    its RFC 9728 metadata and each ``401`` names it in ``WWW-Authenticate``.

    On a loopback ``host`` only loopback ``Host`` headers (421 otherwise) and loopback ``Origin``s
    (403 otherwise) pass, plus any ``allowed_hosts`` / ``allowed_origins`` (``"name:*"`` allows any
    port). A non-loopback ``host`` needs ``allowed_hosts`` or an ``auth`` hook (``ValueError``
    otherwise). Both transports get the same checks.
    """
    if transport not in ("http", "sse"):
        raise ValueError(f"http_app serves 'http' or 'sse', got {transport!r}")
    if auth is not None and not callable(auth):
        raise TypeError("auth takes a function auth(request) -> bool (sync or async)")
    if protected_resource is not None and auth is None:
        raise ValueError("protected_resource needs an auth hook that checks the bearer token")
    guard = HostOriginGuard.for_bind(
        host,
        allowed_hosts,
        allowed_origins,
        has_auth=auth is not None,
        surface="MCP over HTTP",
        guide="docs/guide/mcp.md",
        strict=True,
    )
    settings = _transport_settings()
    app = (
        server.streamable_http_app(streamable_http_path=path, host=host, transport_security=settings)
        if transport == "http"
        else _sse_app(server, settings)
    )
    if protected_resource is None:
        return guarded(app, guard, None if auth is None else _yes_or_no(auth))
    assert auth is not None
    gate = guarded(app, guard, _yes_or_no(auth), render=_bearer_challenge(protected_resource.metadata_url))
    return _with_resource_metadata(gate, guard, protected_resource)


def _bearer_challenge(metadata_url: str) -> Callable[[Any], Any]:
    """Refusals as plain text; a ``401`` names the protected resource metadata (MCP authorization spec)."""
    from starlette.responses import PlainTextResponse

    def render(refusal: Any) -> Any:
        headers = {"WWW-Authenticate": f'Bearer resource_metadata="{metadata_url}"'} if refusal.status == 401 else None
        return PlainTextResponse(refusal.message, status_code=refusal.status, headers=headers)

    return render


def _with_resource_metadata(app: Any, guard: HostOriginGuard, resource: ProtectedResource) -> Any:
    """``app``, plus the public RFC 9728 document at its well-known path (behind the Host/Origin check only)."""
    from starlette.responses import JSONResponse

    # the document behind the same gate, without the auth hook (a client reads it before it has a token)
    metadata = guarded(JSONResponse(resource.metadata(), headers={"Cache-Control": "max-age=3600"}), guard)
    paths = {resource.metadata_path, "/.well-known/oauth-protected-resource"}

    async def serve_metadata(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") in paths:
            await metadata(scope, receive, send)
            return
        await app(scope, receive, send)

    return serve_metadata


async def aserve(
    tools: Sequence[Any] = (),
    resources: Mapping[str, Any] | Sequence[Document] = (),
    prompts: Mapping[str, PromptFunction] | Sequence[PromptFunction] = (),
    *,
    name: str = "chatclient",
    transport: Literal["stdio", "http", "sse"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    instructions: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    auth: AuthHook | None = None,
    completions: Mapping[str, Mapping[str, CompletionSource]] | None = None,
    resource_changes: ResourceChanges | None = None,
    protected_resource: ProtectedResource | None = None,
) -> None:
    """Async twin of ``serve``: runs until stdin closes (stdio) or the task is cancelled (http)."""
    if transport not in ("stdio", "http", "sse"):
        raise ValueError(f"transport must be 'stdio', 'http' or 'sse', got {transport!r}")
    server = build_server(
        tools,
        resources,
        prompts,
        name=name,
        instructions=instructions,
        completions=completions,
        resource_changes=resource_changes,
    )
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    import uvicorn

    app = http_app(
        server,
        transport=transport,
        host=host,
        path=path,
        allowed_hosts=allowed_hosts,
        allowed_origins=allowed_origins,
        auth=auth,
        protected_resource=protected_resource,
    )
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()


def _sse_app(server: Server[Any], settings: Any) -> Any:
    """The older HTTP+SSE transport: ``GET /sse`` opens the stream, ``POST /messages/`` carries requests."""
    from mcp.server.sse import SseServerTransport
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    sse = SseServerTransport("/messages/", security_settings=settings)

    async def handle_sse(request: Request) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return Response()

    return Starlette(
        routes=[Route("/sse", handle_sse, methods=["GET"]), Mount("/messages/", app=sse.handle_post_message)]
    )


def serve(
    tools: Sequence[Any] = (),
    resources: Mapping[str, Any] | Sequence[Document] = (),
    prompts: Mapping[str, PromptFunction] | Sequence[PromptFunction] = (),
    *,
    name: str = "chatclient",
    transport: Literal["stdio", "http", "sse"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    instructions: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
    allowed_origins: Sequence[str] | None = None,
    auth: AuthHook | None = None,
    completions: Mapping[str, Mapping[str, CompletionSource]] | None = None,
    resource_changes: ResourceChanges | None = None,
    protected_resource: ProtectedResource | None = None,
) -> None:
    """Serve tools, resources and prompts over MCP, blocking until the client goes away (stdio) or Ctrl-C (http).

    ``transport="stdio"`` is what editors and ``McpClient.stdio`` start as a subprocess (keep
    ``print`` off stdout: it carries the protocol); ``"http"`` serves streamable HTTP at
    ``http://host:port/path``; ``"sse"`` serves the older HTTP+SSE transport at
    ``http://host:port/sse`` for clients that need it. Both HTTP transports refuse a foreign
    ``Host`` (421) or ``Origin`` (403), so a web page cannot reach the tools through DNS
    rebinding; binding a non-loopback ``host`` needs ``allowed_hosts`` (and ``allowed_origins``
    for browsers) or an ``auth(request) -> bool`` hook (see ``http_app``). ``completions`` and
    ``resource_changes`` are described in ``build_server``; ``protected_resource`` (with an
    ``auth`` hook checking bearer tokens) makes the server an OAuth resource server (see
    ``chatclient.mcp.oauth.ProtectedResource``).

    >>> from chatclient.tools import tool
    >>> @tool
    ... def add(a: int, b: int) -> int:
    ...     '''Add two integers.'''
    ...     return a + b
    >>> serve([add], name="calculator")  # doctest: +SKIP
    """
    import anyio

    anyio.run(
        lambda: aserve(
            tools,
            resources,
            prompts,
            name=name,
            transport=transport,
            host=host,
            port=port,
            path=path,
            instructions=instructions,
            allowed_hosts=allowed_hosts,
            allowed_origins=allowed_origins,
            auth=auth,
            completions=completions,
            resource_changes=resource_changes,
            protected_resource=protected_resource,
        )
    )


__all__ = ["AuthHook", "aserve", "build_server", "chat_client_tool", "http_app", "serve"]
