"""Secrets taken out of what names an MCP server: its URL, its command line, its headers.

Used for every log line, error message, tool-call content and stored text that shows how a server
is reached. Bottom layer: imports nothing of acp_green. Redaction errs on the side of hiding:
any query parameter, option or header whose name looks like a credential loses its value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

#: What replaces a secret.
HIDDEN = "***"

#: Names (of query parameters, options, headers) whose values are secrets.
_SECRET_NAME = re.compile(
    r"token|key|secret|pass(word|wd)?|pwd|auth|sig(nature)?|credential|cookie|session|bearer|private",
    re.IGNORECASE,
)
#: `--token=x`, `password=x`, `-api_key:x`: an option naming a secret with its value attached.
_ATTACHED = re.compile(r"^(-{0,2}[A-Za-z0-9_.-]*?)([=:])(.*)$", re.DOTALL)


def secret_name(name: str) -> bool:
    """True when a parameter, option or header of this name carries a secret."""
    return bool(_SECRET_NAME.search(name))


def redact_url(url: str) -> str:
    """The URL without its userinfo and with the values of secret-looking query parameters hidden."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"{HIDDEN}@{netloc.rsplit('@', 1)[1]}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode([(k, HIDDEN if secret_name(k) else v) for k, v in pairs], safe="*")
        fragment = HIDDEN if parts.fragment and "=" in parts.fragment else parts.fragment
        return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
    except ValueError:  # not parseable as a URL at all: show nothing of it
        return HIDDEN


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with the values of secret-looking options hidden (`--token=x`, `--api-key x`, `password=x`) and URLs redacted."""
    shown: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            shown.append(HIDDEN)
            hide_next = False
            continue
        attached = _ATTACHED.match(arg)
        if "://" in arg and not (attached and secret_name(attached.group(1))):
            shown.append(redact_url(arg))
        elif attached and attached.group(1).strip("-") and secret_name(attached.group(1)):
            shown.append(f"{attached.group(1)}{attached.group(2)}{HIDDEN}")
        elif arg.startswith("-") and secret_name(arg):
            shown.append(arg)
            hide_next = True
        else:
            shown.append(arg)
    return shown


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Headers with the values of credential-looking ones (Authorization, Cookie, X-Api-Key...) hidden."""
    return {name: HIDDEN if secret_name(name) else value for name, value in headers.items()}


def secrets_of(url: str, headers: Mapping[str, str] = {}) -> list[str]:
    """The secret values a URL and headers carry, to scrub from text that may repeat them (a server's error page)."""
    found: list[str] = []
    try:
        parts = urlsplit(url)
        if "@" in parts.netloc:
            userinfo = parts.netloc.rsplit("@", 1)[0]
            found += [userinfo, *userinfo.split(":", 1)]
        found += [v for k, v in parse_qsl(parts.query, keep_blank_values=True) if secret_name(k)]
    except ValueError:
        pass
    found += [v for k, v in headers.items() if secret_name(k)]
    return sorted({s for s in found if len(s) >= 4}, key=len, reverse=True)


def scrub(text: str, secrets: Sequence[str]) -> str:
    """`text` with every occurrence of each secret hidden."""
    for secret in secrets:
        text = text.replace(secret, HIDDEN)
    return text
