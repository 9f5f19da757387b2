"""A malformed answer naming one of the agent's own requests releases that request with an error.

The agent asks the client (session/request_permission here) and waits. A client that answers with
the right id but a broken envelope — `jsonrpc` missing or "1.0", the id written 1001.0 or 1001e0,
NaN or Infinity in the body, invalid UTF-8 — used to leave the request waiting forever (the line
was refused id null and forgotten); the official TypeScript SDK releases it. Now the waiter raises
ClientError naming the malformed answer, nothing is sent back for the answer (a response is never
answered), and the connection goes on as before.

"The right id" (`wire.answered_id`): our ids are integers; an integral finite number (1001.0,
1.001e3) names that integer, since JSON cannot tell 1001.0 from 1001; 1001.5, true and the string
"1001" name no request of ours (the controls below) — JSON-RPC ids are strings or integers, and a
string id is another id than the integer.
"""

from __future__ import annotations

import json
from typing import Any

import gevent
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_green.errors import ClientError
from acp_green.rpc.endpoint import Endpoint
from tests.helpers import wait_until
from tests.unit_harness import Sink

METHOD = "session/request_permission"
PARAMS = {"sessionId": "s", "toolCall": {"toolCallId": "t"}, "options": []}


class _Connection:
    """An endpoint with no routes on an in-memory sink: the test is the client."""

    def __init__(self) -> None:
        self.sink = Sink([])
        self.endpoint = Endpoint(self.sink)  # type: ignore[arg-type]
        self.probes = 0

    def ask(self) -> tuple[gevent.Greenlet, int]:
        """The agent asks the client; its waiting greenlet and the id it used."""
        before = len(self.sink.requests(METHOD))
        waiter = gevent.spawn(self._call)
        asked = wait_until(lambda: self.sink.requests(METHOD)[before:], 10, "the agent's request", self.sink.changed)
        return waiter, asked[0]["id"]

    def _call(self) -> Any:
        """The request's result, or the ClientError it raised (returned: a failed greenlet is a test failure here)."""
        try:
            return self.endpoint.client.call(METHOD, PARAMS)
        except ClientError as exc:
            return exc

    def usable(self) -> None:
        """The connection still works: a request of the client's is answered with its own id (-32601:
        this endpoint has no routes), and a new request of the agent's is released by a good answer."""
        self.probes += 1
        probe_id = f"probe-{self.probes}"
        self.endpoint.handle_line(json.dumps({"jsonrpc": "2.0", "id": probe_id, "method": "nope/nothing"}).encode())
        assert self.sink.response(probe_id)["error"]["code"] == -32601
        waiter, request_id = self.ask()
        self.endpoint.handle_line(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"outcome": {"outcome": "cancelled"}}}).encode())
        assert waiter.get(timeout=10) == {"outcome": {"outcome": "cancelled"}}

    def id_null_answers(self) -> list[dict[str, Any]]:
        return [m for m in self.sink.responses() if m.get("id") is None]


def _released(waiter: gevent.Greenlet) -> ClientError:
    """The ClientError the waiter raised; fails if it is still waiting after a generous bound."""
    waiter.join(timeout=10)
    assert waiter.ready(), "the waiter is still waiting"
    outcome = waiter.get()
    assert isinstance(outcome, ClientError), outcome
    return outcome


@pytest.mark.parametrize(("answer", "named"), [
    ('{"id": @ID@, "result": {}}', '"jsonrpc"'),
    ('{"jsonrpc": "1.0", "id": @ID@, "result": {"outcome": {"outcome": "cancelled"}}}', '"jsonrpc"'),
    ('{"jsonrpc": 2.0, "id": @ID@, "error": {"code": 1, "message": "m"}}', '"jsonrpc"'),
    ('{"jsonrpc": "2.0", "id": @ID@.0, "result": {}}', "Invalid id: the number"),
    ('{"jsonrpc": "2.0", "id": @ID@e0, "result": {}}', "Invalid id: the number"),
    ('{"jsonrpc": "2.0", "id": @ID@, "result": {"outcome": NaN}}', "NaN is not JSON"),
    ('{"jsonrpc": "2.0", "id": @ID@, "error": {"code": -Infinity, "message": "m"}}', "-Infinity is not JSON"),
    ('{"jsonrpc": "2.0", "id": @ID@, "result": {"x": "\xff"}}', "invalid UTF-8"),
])
def test_a_malformed_answer_with_the_right_id_releases_the_waiter(answer: str, named: str) -> None:
    """Item 1: each malformed answer releases the request with ClientError naming what was wrong;
    nothing is answered to it, and the connection stays usable."""
    connection = _Connection()
    waiter, request_id = connection.ask()
    connection.endpoint.handle_line(answer.replace("@ID@", str(request_id)).encode("latin-1"))
    error = _released(waiter)
    assert "malformed answer" in str(error) and named in str(error), str(error)
    assert connection.id_null_answers() == []
    connection.usable()


def test_the_id_1001_0_names_request_1001() -> None:
    """The case as reported: request 1001 (after 1001 answered ones) and an answer with id 1001.0."""
    connection = _Connection()
    for _ in range(1001):
        waiter, request_id = connection.ask()
        connection.endpoint.handle_line(b'{"jsonrpc":"2.0","id":%d,"result":{}}' % request_id)
        waiter.get(timeout=10)
    waiter, request_id = connection.ask()
    assert request_id == 1001
    connection.endpoint.handle_line(b'{"jsonrpc":"2.0","id":1001.0,"result":{"outcome":{"outcome":"cancelled"}}}')
    assert "malformed answer" in str(_released(waiter))


@pytest.mark.parametrize("other_id", ["@ID@.5", "true", '"@ID@"', "null", "[@ID@]"])
def test_an_answer_naming_no_request_of_ours_leaves_the_waiter_for_its_own_answer(other_id: str) -> None:
    """The controls: for request 1, the ids 1.5, true (Python's True == 1), the string "1", null
    and [1] name no request of ours, so these (malformed: no `jsonrpc`) answers release nothing;
    the request's own answer still does."""
    connection = _Connection()
    first, first_id = connection.ask()
    connection.endpoint.handle_line(b'{"jsonrpc": "2.0", "id": %d, "result": {}}' % first_id)
    first.get(timeout=10)
    waiter, request_id = connection.ask()
    assert request_id == 1
    other = other_id.replace("@ID@", str(request_id))
    connection.endpoint.handle_line(b'{"id": %s, "result": {}}' % other.encode())
    gevent.sleep(0)
    assert not waiter.ready()
    connection.endpoint.handle_line(b'{"jsonrpc": "2.0", "id": %d, "result": {"ok": 1}}' % request_id)
    assert waiter.get(timeout=10) == {"ok": 1}


# -- property: any malformed answer with the right id ---------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
CONSTANTS = st.sampled_from(["NaN", "Infinity", "-Infinity"])


@st.composite
def malformed_answers(draw: st.DrawFn) -> tuple[str, list[bytes]]:
    """A template of an answer (`@ID@` for the waiter's id) with at least one fault; the faults it has."""
    faults: set[str] = draw(st.sets(st.sampled_from(["jsonrpc", "id", "constant", "utf8", "shape"]), min_size=1))
    members: list[tuple[str, str]] = []
    if "jsonrpc" in faults:
        wrong = draw(st.sampled_from([None, '"1.0"', "2.0", "2", "null", '"2.0 "', '"2"', "true"]))
        if wrong is not None:
            members.append(("jsonrpc", wrong))
    else:
        members.append(("jsonrpc", '"2.0"'))
    members.append(("id", draw(st.sampled_from(["@ID@.0", "@ID@e0", "@ID@.000E+0", "@ID@.0e0"])) if "id" in faults else "@ID@"))
    parts = [f'"value": {json.dumps(draw(JSON_VALUES))}']
    if "constant" in faults:
        parts.append(f'"n": {draw(CONSTANTS)}')
    if "utf8" in faults:
        parts.append('"text": "\xff\xfe' + draw(st.text(st.characters(codec="ascii", exclude_characters='"\\'), max_size=5)) + '"')
    body = "{" + ", ".join(draw(st.permutations(parts))) + "}"
    shape = draw(st.sampled_from(["both", "neither", "error-not-object"])) if "shape" in faults else draw(st.sampled_from(["result", "error"]))
    if shape in ("result", "both"):
        members.append(("result", body))
    if shape in ("error", "both"):
        members.append(("error", '{"code": -32000, "message": "no", "data": ' + body + "}"))
    if shape == "error-not-object":
        members.append(("error", draw(st.sampled_from(['"boom"', "[]", "7", "true"]))))
    members = draw(st.permutations(members))
    return "{" + ", ".join(f'"{key}": {value}' for key, value in members) + "}", sorted(faults)  # type: ignore[return-value]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(malformed_answers())
def test_any_malformed_answer_with_the_right_id_releases_the_waiter_and_the_connection_goes_on(case: tuple[str, list[str]]) -> None:
    """Property (item 1): whatever is wrong with an answer that names the waiting request's id,
    the waiter is released with ClientError naming the malformed answer, the answer itself is not
    answered, and the connection then serves requests both ways as before."""
    template, _faults = case
    connection = _Connection()
    waiter, request_id = connection.ask()
    connection.endpoint.handle_line(template.replace("@ID@", str(request_id)).encode("latin-1"))
    assert "malformed answer" in str(_released(waiter))
    assert connection.id_null_answers() == []
    connection.usable()
