"""Where ``AiohttpTransport`` was imported from before the HTTP machinery moved into ``chatclient.models.http``.

Kept so that code written against the earlier path keeps working; new code imports
``chatclient.models.http.aiohttp_transport``.
"""

from chatclient.models.http.aiohttp_transport import AiohttpTransport, DirectResponse

__all__ = ["AiohttpTransport", "DirectResponse"]
