"""Agent-to-Agent (A2A) protocol on the official ``a2a-sdk`` (extra ``a2a``).

``a2a_agent(url_or_card)`` makes a remote A2A agent a local ``Agent`` (usable alone or in any
workflow); ``serve_a2a(agent)`` exposes an agent or workflow as an A2A server with an agent card, and
``a2a_app(agent, url=...)`` builds the ASGI app for those who mount it themselves.

    from chatclient.a2a import a2a_agent, serve_a2a
    with serve_a2a(writer, port=8000) as server:
        remote = a2a_agent(server.url)
        print(remote.run(request="a story about otters").output)

The SDK is imported on first use. See docs/guide/a2a.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chatclient._lazy import lazy_getattr

if TYPE_CHECKING:
    from chatclient.a2a.client import A2AAgent, a2a_agent
    from chatclient.a2a.server import A2AServer, a2a_app, agent_card, serve_a2a

_WHERE = {
    "A2AAgent": "chatclient.a2a.client",
    "a2a_agent": "chatclient.a2a.client",
    "A2AServer": "chatclient.a2a.server",
    "a2a_app": "chatclient.a2a.server",
    "agent_card": "chatclient.a2a.server",
    "serve_a2a": "chatclient.a2a.server",
}

__getattr__ = lazy_getattr(__name__, _WHERE, globals())

__all__ = ["A2AAgent", "A2AServer", "a2a_agent", "a2a_app", "agent_card", "serve_a2a"]
