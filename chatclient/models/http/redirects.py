"""Redirects, followed by the HTTP layer itself so that no credential header reaches another origin."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import httpx

from chatclient.errors import ModelResponseError
from chatclient.models.http.credentials import redact_url

MAX_REDIRECTS = 5
# Statuses followed by re-sending the same POST: a chat API has no GET form of a request, so the
# classic "turn POST into GET" rule would only produce a confusing 404/405 further down.
REDIRECT_STATUSES = frozenset({301, 302, 307, 308})


def _same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    return (a.scheme, a.host, a.port or (443 if a.scheme == "https" else 80)) == (
        b.scheme,
        b.host,
        b.port or (443 if b.scheme == "https" else 80),
    )


def next_request(
    provider: str,
    request: httpx.Request,
    response: httpx.Response,
    hops: int,
    *,
    scrub: Callable[[str], str],
    credential_headers: Iterable[str],
) -> httpx.Request | None:
    """The next request of a redirect, or ``None`` when ``response`` is not one to follow.

    Followed here rather than by httpx (every request is sent with ``follow_redirects=False``,
    whatever the client says) so that no credential header ever reaches another origin: httpx
    itself only strips ``Authorization``, and only when it follows.
    """
    if response.status_code not in REDIRECT_STATUSES or "location" not in response.headers:
        return None
    target = request.url.join(response.headers["location"])
    if hops >= MAX_REDIRECTS:
        raise ModelResponseError(
            f"{provider} redirected more than {MAX_REDIRECTS} times (last to "
            f"{scrub(redact_url(str(target)))}); set base_url to the final address"
        )
    if target.scheme not in ("http", "https"):
        raise ModelResponseError(f"{provider} redirected to an unsupported URL scheme {target.scheme!r}")
    headers = httpx.Headers(request.headers)
    headers.pop("host", None)
    if not _same_origin(target, request.url):
        for name in [*credential_headers, "authorization", "proxy-authorization", "cookie"]:
            headers.pop(name, None)
        for name, value in list(headers.items()):
            if scrub(value) != value:  # a custom header carrying a secret under a plain name
                headers.pop(name, None)
    if target.userinfo:
        target = target.copy_with(username=None, password=None)
    return httpx.Request("POST", target, content=request.content, headers=headers, extensions=request.extensions)
