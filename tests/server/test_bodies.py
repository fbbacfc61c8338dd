"""Bad input over HTTP is a 4xx naming what is wrong, never a 500, and changes nothing."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
from tests.server.conftest import Site


@pytest.fixture
def run_id(site: Site) -> str:
    agent = site.client("agent")
    run_id = str(agent.post("/v1/runs", json={}).json()["run_id"])
    agent.post(f"/v1/runs/{run_id}/steps", json={"tool": "stripe.create_charge"})
    return run_id


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "the body is not JSON"),
        (b"[1, 2]", "the body must be a JSON object"),
        (b'{"tool": 5}', "field `tool`: Input should be a valid string"),
        (b'{"tool": ""}', "field `tool`: String should have at least 1 character"),
        (b'{"tool": "a", "depends_on": [true]}', "field `depends_on.0`: Input should be a valid integer"),
        (b'{"tool": "a", "depends_on": [-1]}', "field `depends_on.0`: Input should be greater than or equal to 0"),
        (b'{"tool": "a", "dependson": [0]}', "field `dependson`: Extra inputs are not permitted"),
        (b'{"args": {}}', "field `tool`: Field required"),
        (b'{"tool": "a", "depends_on": [4]}', "depends_on: step 4 is not an earlier step"),
        (b'{"tool": "a", "args": {"x": NaN}}', "the body is not JSON: NaN is not a JSON number"),
        (b'{"tool": "a", "args": {"x": -Infinity}}', "the body is not JSON: -Infinity is not a JSON number"),
        (b'{"tool": "a", "args": {"x": 1e400}}', "the body is not JSON: 1e400 is too large for a number"),
        (b'{"tool": "a", "args": {"n": ' + b"9" * 5000 + b"}}",
         "the body is not JSON: a number of 5,000 digits is longer than the 4,300 allowed"),
        (b'{"tool": "a", "args": {"k": ' + b"[" * 975 + b"]" * 975 + b"}}",
         "the body: JSON nested deeper than 200 levels"),
        (b'{"tool": "a", "args": {"k": ' + b"[" * 20_000 + b"]" * 20_000 + b"}}",
         "the body: JSON nested deeper than 200 levels"),
        (b'{"tool": "a", "args": [1, 2]}', "field `args`: Input should be a valid dictionary"),
        (b'{"tool": "a", "args": "x=1"}', "field `args`: Input should be a valid dictionary"),
        (b"[" * 100_000, "the body: JSON nested deeper than 200 levels"),
        (b"\xff\xfe", "the body is not JSON"),
        (b'{"tool": "a", "args": {"k": "\\ud800"}}', "the body is not valid Unicode text: it holds a lone surrogate"),
        (b'{"tool": "\\udfff"}', "the body is not valid Unicode text"),
        (b'{"tool": "a", "args": {"k": "\xed\xa0\x80"}}', "the body is not JSON"),  # a surrogate, UTF-8 encoded
        (b'{"tool": "a", "tool": "b"}', "the body has the key 'tool' twice in one object"),
        (b'{"tool": "a", "args": {"to": [{"x": 1, "x": 2}]}}', "the body has the key 'x' twice in one object"),
    ],
)
def test_a_bad_step_body_is_a_400_naming_the_field(site: Site, run_id: str, content: bytes, message: str) -> None:
    answer = site.client("agent").post(f"/v1/runs/{run_id}/steps", content=content,
                                       headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "bad_input"
    assert answer.json()["error"]["message"].startswith(message)
    assert len(site.ledger.get_run(run_id).steps()) == 1


def test_other_bodies_name_their_fields_too(site: Site, run_id: str) -> None:
    agent, admin = site.client("agent"), site.client("admin")
    cases = [
        (agent.post("/v1/runs", json={"mode": "sideways"}), "field `mode`: Input should be 'observe' or 'enforce'"),
        (agent.post("/v1/runs", json={"scope": {"tenant": 7}}), "field `scope.tenant`: Input should be a valid string"),
        (agent.post("/v1/runs", json={"labels": {"a": 1}}), "field `labels.a`: Input should be a valid string"),
        (agent.post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "done"}), "field `status`"),
        (admin.post(f"/v1/runs/{run_id}/rollback", json={"confirm": "yes"}),
         "field `confirm`: Input should be a valid boolean"),
        (admin.post(f"/v1/runs/{run_id}/rollback", json={"retries": 11}), "field `retries`"),
        (admin.post("/v1/halt", json={"scope": {}}), "field `reason`: Field required"),
        (admin.post("/v1/keys", json={"name": "x", "role": "root"}), "field `role`"),
        (admin.post("/v1/keys", json={"name": "no spaces", "role": "agent"}), "bad key name"),
        (agent.post(f"/v1/runs/{run_id}/steps/0/outcome", content=b'{"status": "failed", "error": "\\ud83d"}',
                    headers={"Content-Type": "application/json"}), "the body is not valid Unicode text"),
        (admin.post("/v1/halt", content=b'{"reason": "\\udc00"}', headers={"Content-Type": "application/json"}),
         "the body is not valid Unicode text"),
        (agent.post("/v1/runs", json={"scope": "acme"}), "field `scope`: Input should be an object"),
        (agent.post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "failed", "result": {"id": "x"}}),
         "field `result`: only a succeeded outcome has a result"),
        (agent.post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "uncertain", "result": 1}),
         "field `result`: only a succeeded outcome has a result"),
        (agent.post(f"/v1/runs/{run_id}/steps/0/outcome", json={"status": "succeeded", "error": "boom"}),
         "field `error`: a succeeded outcome has no error"),
        (agent.post(f"/v1/runs/{run_id}/steps/0/outcome", content=b'{"status": "succeeded", "result": {"id": NaN}}',
                    headers={"Content-Type": "application/json"}), "the body is not JSON: NaN is not a JSON number"),
        (agent.post(f"/v1/runs/{run_id}/steps/0/outcome", content=b'{"status": "succeeded", "status": "failed"}',
                    headers={"Content-Type": "application/json"}), "the body has the key 'status' twice in one object"),
    ]
    for answer, message in cases:
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["message"].startswith(message), answer.text


def test_bad_ids_step_numbers_cursors_and_limits_are_400(site: Site, run_id: str) -> None:
    agent = site.client("agent")
    assert "malformed run id" in agent.get("/v1/runs/nope").json()["error"]["message"]
    assert agent.get("/v1/runs/run_" + "x" * 65).status_code == 400
    bad_step = agent.post(f"/v1/runs/{run_id}/steps/first/outcome", json={"status": "failed"})
    assert bad_step.status_code == 400 and "bad step number 'first'" in bad_step.json()["error"]["message"]
    assert agent.post(f"/v1/runs/{run_id}/steps/99999999999/outcome", json={"status": "failed"}).status_code == 400
    deep = base64.urlsafe_b64encode(b"[" * 2000 + b"]" * 2000).decode()
    for params in ({"cursor": "%%%"}, {"cursor": "bm90IGpzb24"}, {"cursor": "WzFd"}, {"cursor": deep}, {"limit": "0"},
                   {"limit": "x"}, {"limit": "1001"}):
        answer = agent.get("/v1/runs", params=params)
        assert answer.status_code == 400, (params, answer.text)
    assert agent.get(f"/v1/runs/{run_id}/events", params={"cursor": "InRleHQi"}).status_code == 400
    since = agent.get("/v1/runs", params={"since": "last tuesday"})
    assert since.status_code == 400
    assert since.json()["error"]["message"].startswith("since 'last tuesday': expected a duration like 30m")
    for far in ("99999999999d", "9999999w", "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"):
        answer = agent.get("/v1/runs", params={"since": far})
        assert answer.status_code == 400 and answer.json()["error"]["message"] == (
            f"since {far!r}: too far from now to be a date"), answer.text
    for digits in ("\u00b2", "\u0663"):  # "²" and "٣" are digits to str.isdigit, not to a URL's reader
        assert agent.get("/v1/runs", params={"limit": digits}).status_code == 400
        assert agent.post(f"/v1/runs/{run_id}/steps/{digits}/outcome", json={"status": "failed"}).status_code == 400
    long_id = agent.get("/v1/runs/run_" + "x" * 5000).json()["error"]["message"]
    assert len(long_id) < 200 and "..." in long_id
    assert site.client("operator").get("/v1/approvals", params={"run_id": "nope"}).status_code == 400
    assert site.ledger.get_run(run_id).steps()[0].status.value == "intended"


def chunks(size: int) -> Iterator[bytes]:
    sent = 0
    while sent < size:
        yield b" " * 65536
        sent += 65536


def test_a_body_over_one_mebibyte_is_refused_with_413(site: Site, run_id: str) -> None:
    agent = site.client("agent")
    big = b'{"tool": "a", "args": "' + b"x" * (1 << 20) + b'"}'
    declared = agent.post(f"/v1/runs/{run_id}/steps", content=big)
    assert declared.status_code == 413 and declared.json()["error"]["code"] == "too_large"
    streamed = agent.post(f"/v1/runs/{run_id}/steps", content=chunks((1 << 20) + 1))
    assert streamed.status_code == 413
    assert len(site.ledger.get_run(run_id).steps()) == 1
    assert agent.get("/healthz").status_code == 200


def test_an_escaped_surrogate_pair_is_just_a_character(site: Site, run_id: str) -> None:
    body = b'{"tool": "a", "args": {"k": "\\ud83d\\ude00"}}'
    answer = site.client("agent").post(f"/v1/runs/{run_id}/steps", content=body,
                                       headers={"Content-Type": "application/json"})
    assert answer.status_code == 201, answer.text
    assert site.ledger.get_run(run_id).steps()[1].args == {"k": "😀"}
