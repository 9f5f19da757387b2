"""Property tests of the redaction boundary (acp_green/redact.py): whatever the secret's text, it
never survives in what is shown of a URL or a command line."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.redact import redact_argv, redact_url

# Secrets long enough that finding one by chance in the rest of the URL is impossible.
SECRETS = st.text(alphabet=st.characters(min_codepoint=0x30, max_codepoint=0x7a, categories=("Lu", "Ll", "Nd")),
                  min_size=12, max_size=40)
HOSTS = st.sampled_from(["example.com", "127.0.0.1:8080", "mcp.internal"])


@settings(max_examples=200, deadline=None)
@given(secret=SECRETS, host=HOSTS, key=st.sampled_from(["api_key", "token", "access_token", "secret", "password", "auth", "sig"]))
def test_a_secret_in_userinfo_or_a_secret_query_parameter_never_survives_redact_url(secret: str, host: str, key: str) -> None:
    for url in (f"https://user:{quote(secret)}@{host}/mcp", f"http://{host}/mcp?x=1&{key}={quote(secret)}"):
        assert secret not in redact_url(url), url


@settings(max_examples=200, deadline=None)
@given(secret=SECRETS, option=st.sampled_from(["--token", "--api-key", "--password", "-secret"]), attached=st.booleans(),
       before=st.lists(st.sampled_from(["serve", "-v", "--port", "8080"]), max_size=3))
def test_a_secret_option_value_never_survives_redact_argv(secret: str, option: str, attached: bool, before: list[str]) -> None:
    argv = ["server", *before, *([f"{option}={secret}"] if attached else [option, secret])]
    assert all(secret not in shown for shown in redact_argv(argv)), argv
