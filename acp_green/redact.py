"""Secrets taken out of what names an MCP server: its URL, its command line, its headers.

Used for every log line, error message, tool-call content and stored text that shows how a server
is reached. Bottom layer: imports nothing of acp_green. Redaction errs on the side of hiding:
any query parameter, option or header whose name looks like a credential loses its value.

What of a URL is hidden (`redact_url`; `secrets_of` lists the same for `scrub`):

- its userinfo (`user:password@`), whole;
- its fragment (`#token=...`), whole: it never reaches the server, so nothing is lost;
- in its query, the value of a parameter whose name looks like a credential (`secret_name`:
  `api_key=`, `token=`, ...), and any name or value that looks like a token (below);
- in its path, each segment that looks like a token, that follows a segment whose name looks
  like a credential (`/key/<anything>/`), or that holds `name=value` with such a name;
- in its host, each label that looks like a token (`sk-abc123.example.com`).

A text looks like a token (`looks_like_token`), once percent-decoded, when it holds

1. a known credential prefix at the start of a word, followed by at least four more letters,
   digits, `-` or `_`: `sk-`, `sk_`, `rk_`, `pk_` (OpenAI, Anthropic, Stripe), `ghp_` `gho_`
   `ghu_` `ghs_` `ghr_` `github_pat_` (GitHub), `glpat-` (GitLab), `xoxa-` `xoxb-` `xoxp-`
   `xoxr-` `xoxs-` `xapp-` (Slack), `AKIA` `ASIA` (AWS), `AIza` `ya29.` (Google), `hf_`
   (Hugging Face), `npm_`, `pypi-`, `eyJ` (a JWT); or
2. a run of at least 16 letters, digits, `-` and `_` that reads as random: it mixes upper case,
   lower case and digits (base64, base62 keys), or at least a third of its letters and digits
   are digits (hex keys, UUIDs).

Words (`mcp`, `v1`, `model-context-protocol`, `2025-06-18`) stay; so may a secret of short
lower-case letters only, which nothing tells from a word.

The files that carry conversations out of the store (`sessions export -o`, `trace html`) are
written private to the user and never through a symbolic link (`write_private`); a trace is read
only from the file named, not through a link (`open_no_follow`).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Mapping, Sequence
from typing import BinaryIO
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

#: What replaces a secret.
HIDDEN = "***"

#: Names (of query parameters, options, headers) whose values are secrets.
_SECRET_NAME = re.compile(
    r"token|key|secret|pass(word|wd)?|pwd|auth|sig(nature)?|credential|cookie|session|bearer|private",
    re.IGNORECASE,
)
#: `--token=x`, `password=x`, `-api_key:x`: an option naming a secret with its value attached.
_ATTACHED = re.compile(r"^(-{0,2}[A-Za-z0-9_.-]*?)([=:])(.*)$", re.DOTALL)


#: Credential prefixes at the start of a word, with at least four more token characters (rule 1).
_TOKEN_PREFIX = re.compile(
    r"(?<![A-Za-z0-9])(?:sk-|sk_|rk_|pk_|gh[pousr]_|github_pat_|glpat-|xox[abprs]-|xapp-|AKIA|ASIA|AIza|ya29\.|hf_|npm_|pypi-|eyJ)"
    r"[A-Za-z0-9_-]{4}"
)
#: Runs of token characters long enough to be a key (rule 2).
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_-]{16,}")
#: A path segment that names the credential in the segment after it (`/key/<the key>/`).
_CREDENTIAL_SEGMENT = re.compile(
    r"(api[-_]?)?(keys?|tokens?|secrets?)|access[-_]?tokens?|pass(word|wd)?|pwd|bearer|credentials?|sig(nature)?",
    re.IGNORECASE,
)


def secret_name(name: str) -> bool:
    """True when a parameter, option or header of this name carries a secret."""
    return bool(_SECRET_NAME.search(name))


def looks_like_token(text: str) -> bool:
    """True when `text` (percent-decoded first) holds what reads as a credential (the module's rules)."""
    for candidate in {text, unquote(text)}:
        if _TOKEN_PREFIX.search(candidate):
            return True
        for run in _TOKEN_RUN.findall(candidate):
            if _random_looking(run):
                return True
    return False


def _random_looking(run: str) -> bool:
    digits = sum(c.isdigit() for c in run)
    letters = sum(c.isalpha() for c in run)
    mixed_case = any(c.isupper() for c in run) and any(c.islower() for c in run)
    return letters > 0 and digits > 0 and (mixed_case or 3 * digits >= digits + letters)


def _secret_segment(segment: str) -> bool:
    """A path segment that is, or holds, a secret: token-like, or `name=value` with a secret-looking name."""
    if looks_like_token(segment):
        return True
    for piece in re.split(r"[;,&]", unquote(segment)):
        name, equals, value = piece.partition("=")
        if equals and value and secret_name(name):
            return True
    return False


def _hidden_parts(url: str) -> tuple[list[str], list[str], list[tuple[str, str]], list[str], str]:
    """What of `url` is secret: host labels, path segments (as written), query pairs (decoded,
    with the values hidden), the secret query texts, and the fragment ("" if none); ValueError
    if it is not a URL."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    host = "" if host.startswith("[") else host.rpartition(":")[0] if ":" in host else host  # no IPv6 address is a token
    labels = [label for label in host.split(".") if looks_like_token(label)]
    segments: list[str] = []
    after_name = False
    for segment in parts.path.split("/"):
        if segment and (after_name or _secret_segment(segment)):
            segments.append(segment)
        after_name = bool(_CREDENTIAL_SEGMENT.fullmatch(unquote(segment)))
    pairs: list[tuple[str, str]] = []
    texts: list[str] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if looks_like_token(name):
            texts.append(name)
            name = HIDDEN
        if value and (secret_name(name) or looks_like_token(value)):
            texts.append(value)
            value = HIDDEN
        pairs.append((name, value))
    return labels, segments, pairs, texts, parts.fragment


def redact_url(url: str) -> str:
    """The URL without its userinfo or fragment, with what looks secret in its host, path and
    query hidden (the module says what)."""
    try:
        parts = urlsplit(url)
        labels, segments, pairs, _texts, fragment = _hidden_parts(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"{HIDDEN}@{netloc.rsplit('@', 1)[1]}"
        if labels:
            host, at, rest = netloc.rpartition("@")
            shown_host = ".".join(HIDDEN if label in labels else label for label in rest.split("."))
            netloc = f"{host}{at}{shown_host}"
        path = "/".join(HIDDEN if segment in segments else segment for segment in parts.path.split("/"))
        query = urlencode(pairs, safe="*") if parts.query else ""
        return urlunsplit((parts.scheme, netloc, path, query, HIDDEN if fragment else ""))
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
        labels, segments, _pairs, texts, fragment = _hidden_parts(url)
        found += labels + texts
        for hidden in [*segments, fragment]:
            decoded = unquote(hidden)
            found += [hidden, decoded, *(piece.partition("=")[2] for piece in re.split(r"[;,&]", decoded))]
    except ValueError:
        pass
    found += [v for k, v in headers.items() if secret_name(k)]
    return sorted({s for s in found if len(s) >= 4}, key=len, reverse=True)


def scrub(text: str, secrets: Sequence[str]) -> str:
    """`text` with every occurrence of each secret hidden."""
    for secret in secrets:
        text = text.replace(secret, HIDDEN)
    return text


# -- files that carry conversations out of the store ------------------------------------------------

#: The mode of a file written for the user alone (an export, a trace's page): it holds whole conversations.
PRIVATE_FILE = 0o600


def write_private(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` (UTF-8) to `path` as a file private to the user, never through a symbolic link.

    A new file is created 0600; an existing regular file of ours is emptied and made 0600 too (it
    is rewritten, as `>` would; O_EXCL would refuse every second run). Refused with OSError, and
    nothing written: a symbolic link as the last component (O_NOFOLLOW: a link planted in a shared
    directory cannot redirect the write), a file of another user (they could read it), a file with
    other hard links (the write would change them too). A FIFO or a device (/dev/null) is written
    as it is.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
    except OSError as exc:
        raise _named_link_error(exc, path) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode):
            if info.st_uid != os.geteuid():
                raise OSError(errno.EPERM, f"it belongs to uid {info.st_uid}, not to this user; not written", str(path))
            if info.st_nlink != 1:
                raise OSError(errno.EMLINK, f"it has {info.st_nlink} hard links; not written", str(path))
            os.fchmod(fd, PRIVATE_FILE)
            os.ftruncate(fd, 0)
        with os.fdopen(fd, "w", encoding="utf-8", closefd=False) as handle:
            handle.write(text)
    finally:
        os.close(fd)


def open_no_follow(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened for reading bytes, refused (OSError) when it is a symbolic link: what names a
    file to read (a trace) is taken as the file itself, so a link cannot make a command read, and
    show, a file the name does not say (give the file the link points to instead)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise _named_link_error(exc, path) from None
    return os.fdopen(fd, "rb")


def _named_link_error(exc: OSError, path: str | os.PathLike[str]) -> OSError:
    """ELOOP from O_NOFOLLOW in words (its own are "Too many levels of symbolic links")."""
    if exc.errno == errno.ELOOP:
        return OSError(errno.ELOOP, "it is a symbolic link; files are not written or read through one", str(path))
    return exc
