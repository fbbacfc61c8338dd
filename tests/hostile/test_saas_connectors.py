"""Hostile input at the stripe, github, slack and http connectors: random forged forward results
against each compensation (made up, or a genuine sealed result with one thing changed) and random
path parameters for an http tool. A forged result is refused with a connector error and reaches no
fake API; a path parameter is refused, or arrives as exactly one segment that decodes to itself."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from tests.connectors.fake_github import TOKEN as GITHUB_TOKEN
from tests.connectors.fake_github import FakeGitHub
from tests.connectors.fake_server import URL, served_with
from tests.connectors.test_http import TOOLS, FakeWidgets
from tests.hostile.fuzz import fuzz_settings, tried

from reversi.connectors import BadArgument, ConnectorError, find_tool, github, slack, stripe
from reversi.connectors._seal import FIELD, key_id
from reversi.core.json_values import canonical
from reversi.demo.fakes.base import FakeBase
from reversi.demo.fakes.slack import CHANNEL, FakeSlack
from reversi.demo.fakes.slack import TOKEN as SLACK_TOKEN
from reversi.demo.fakes.stripe import KEY, FakeStripe

SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=12) | st.sampled_from(
    ["ch_000001", "cus_000002", "pi_000003", "octo/victim", "C0123456789", "1700000000.000100", "w_1", "..", "/"])
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
FORWARD_TOOLS = ["stripe.create_charge", "stripe.create_customer", "stripe.create_payment_intent",
                 "github.create_repo", "github.create_issue", "github.create_file", "slack.post_message",
                 "http.create_widget", "http.put_widget", "http.create_gadget"]


@dataclass
class World:
    """The fakes behind the connectors, and one genuine sealed result per compensation."""

    fakes: list[FakeBase]
    genuine: dict[str, dict[str, Any]]

    def requests(self) -> int:
        return sum(len(fake.requests) for fake in self.fakes)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    (tmp_path / "tools.yaml").write_text(TOOLS)
    monkeypatch.setenv("REVERSI_HTTP_TOOLS", str(tmp_path / "tools.yaml"))
    hub, fakes = FakeGitHub(), [FakeStripe(), FakeSlack(), FakeWidgets()]
    with (served_with(fakes[0], monkeypatch, STRIPE_API_BASE=URL, STRIPE_API_KEY=KEY),
          served_with(hub, monkeypatch, GITHUB_API_URL=URL, GITHUB_TOKEN=GITHUB_TOKEN),
          served_with(fakes[1], monkeypatch, SLACK_API_URL=URL, SLACK_BOT_TOKEN=SLACK_TOKEN),
          served_with(fakes[2], monkeypatch, WIDGETS_URL=URL, WIDGETS_TOKEN="tok")):
        repo = github.create_repo(name="scratch")
        yield World([*fakes, hub], {
            "stripe.refund": stripe.create_charge(amount=100, currency="eur"),
            "stripe.delete_customer": stripe.create_customer(email="a@example.com"),
            "stripe.cancel_payment_intent": stripe.create_payment_intent(amount=100, currency="eur"),
            "github.delete_repo": repo,
            "github.close_issue": github.create_issue(repo=repo["full_name"], title="t"),
            "github.delete_file": github.create_file(repo=repo["full_name"], path="a.txt", content="x", message="m"),
            "slack.delete_message": slack.post_message(channel=CHANNEL, text="hi"),
            "http.delete_widget": find_tool("http.create_widget").invoke({"name": "gear"}),
        })


@st.composite
def forged(draw: st.DrawFn, genuine: dict[str, Any]) -> Any:
    """A made-up result, a made-up seal on a result, or the genuine sealed result with one value changed."""
    how = draw(st.sampled_from(["made up", "made-up seal", "one change"]))
    if how == "made up":
        return draw(JSON | st.dictionaries(st.text(max_size=8), JSON, max_size=4).map(lambda d: {**d, FIELD: d}))
    if how == "made-up seal":
        mark = {"v": 1, "tool": draw(st.sampled_from(FORWARD_TOOLS)), "args": draw(st.dictionaries(
            st.text(max_size=6), JSON, max_size=3)), "key": key_id(), "mac": draw(st.text("0123456789abcdef",
                                                                                          min_size=64, max_size=64))}
        return {**draw(st.dictionaries(st.text(max_size=8), JSON, max_size=4)), FIELD: mark}
    changed = copy.deepcopy(genuine)
    place = draw(st.sampled_from(["result", "seal", "kept arguments"]))
    if place == "seal":  # what the seal vouches with (its version and any extra key vouch for nothing)
        changed[FIELD][draw(st.sampled_from(["tool", "args", "key", "mac"]))] = draw(JSON)
    else:
        where = changed if place == "result" else changed[FIELD]["args"]
        where[draw(st.sampled_from([*(k for k in where if k != FIELD), "id"]))] = draw(JSON)
    assume(canonical(changed) != canonical(genuine))
    return changed


COMPENSATIONS = ["stripe.refund", "stripe.delete_customer", "stripe.cancel_payment_intent", "github.delete_repo",
                 "github.close_issue", "github.delete_file", "slack.delete_message", "http.delete_widget"]


@pytest.mark.parametrize("compensation", COMPENSATIONS)
def test_a_forged_result_never_reaches_the_api_behind_a_compensation(world: World, compensation: str) -> None:
    tool = find_tool(compensation)

    @fuzz_settings(ci=25)
    @given(result=forged(world.genuine[compensation]), step=st.integers(0, 9))
    def attempt(result: Any, step: int) -> None:
        before = world.requests()
        with pytest.raises(ConnectorError) as refused:
            tool.invoke({"result": result, "step": step}, idempotency_key="k-fuzz")
        assert "\n" not in refused.value.message
        assert world.requests() == before, compensation
        tried("saas-forged-results")

    attempt()


def test_a_path_parameter_is_refused_or_arrives_as_one_segment_that_decodes_to_itself(world: World) -> None:
    widgets = world.fakes[2]
    read = find_tool("http.get_widget")

    @fuzz_settings(ci=60)
    @given(value=st.text(max_size=24) | st.sampled_from(["..", ".", "", "a/../b", "%2e%2e", "//127.0.0.1/x",
                                                         "http://127.0.0.1:9/x", "?a=b#c", "%", "\\..\\"]))
    def attempt(value: str) -> None:
        seen = len(widgets.raw_paths)
        refused: BadArgument | None = None
        try:
            read.invoke({"id": value})
        except BadArgument as exc:
            refused = exc
        if refused is not None:
            assert refused.argument == "id" and len(widgets.raw_paths) == seen
        else:
            [raw] = widgets.raw_paths[seen:]
            segment = raw.removeprefix("/widgets/")
            assert raw.startswith("/widgets/") and "/" not in segment and "?" not in raw and "#" not in raw
            assert unquote(segment) == value and segment not in ("", ".", "..")
        tried("saas-path-parameters")

    attempt()
