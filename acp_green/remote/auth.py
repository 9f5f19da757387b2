"""Who may talk to a listening agent: a check run on every HTTP request and WebSocket upgrade.

Connection and session ids are not credentials (anyone who sees one could use it), so the
check looks at each request's own headers, before any byte of its body is read.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping

#: A request's headers (names lower-cased) -> whether it may go on. Refused requests get 401.
Authorize = Callable[[Mapping[str, str]], bool]


def bearer_token(token: str) -> Authorize:
    """Allow the requests that carry `Authorization: Bearer <token>` (compared in constant time)."""
    if not isinstance(token, str) or not token or token != token.strip() or any(c in token for c in "\r\n"):
        raise ValueError("bearer_token: token must be a non-empty string without surrounding spaces or line breaks")
    expected = f"Bearer {token}".encode("utf-8")

    def authorize(headers: Mapping[str, str]) -> bool:
        given = headers.get("authorization", "").encode("utf-8", "surrogateescape")
        return hmac.compare_digest(given, expected)

    return authorize
