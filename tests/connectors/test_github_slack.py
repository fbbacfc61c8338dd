"""The github and slack connectors against fakes of their APIs, rolled back by the real CLI."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.connectors.conftest import Done, compensation_calls, connectors_cli
from tests.connectors.fake_github import TOKEN, USER, FakeGitHub
from tests.connectors.fake_server import URL, served_with
from tests.connectors.forged import assert_refused, forgeries

import reversi
from reversi.connectors import DownstreamError, github, slack
from reversi.demo.fakes.slack import CHANNEL, FakeSlack
from reversi.demo.fakes.slack import TOKEN as SLACK_TOKEN

GITHUB_MANIFEST = github.CONNECTOR.manifest_path()
SLACK_MANIFEST = slack.CONNECTOR.manifest_path()


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    with served_with(FakeGitHub(), monkeypatch, GITHUB_API_URL=URL, GITHUB_TOKEN=TOKEN) as fake:
        yield fake


@pytest.fixture
def chat(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSlack]:
    with served_with(FakeSlack(), monkeypatch, SLACK_API_URL=URL, SLACK_BOT_TOKEN=SLACK_TOKEN) as fake:
        yield fake


def _github_run(ledger: reversi.Ledger) -> str:
    run = ledger.start_run(actor="dev-agent")
    repo = run.call("github.create_repo", {"name": "scratch"}, github.create_repo)
    run.call("github.create_file", {"repo": repo["full_name"], "path": "docs/README.md", "content": "# hi\n",
                                    "message": "Add a readme"}, github.create_file)
    run.call("github.create_issue", {"repo": f"{USER}/old", "title": "Tidy up"}, github.create_issue)
    run.call("github.create_file", {"repo": f"{USER}/old", "path": "notes.txt", "content": "agent notes",
                                    "message": "Notes"}, github.create_file)
    return run.id


def test_a_github_rollback_deletes_what_the_run_made_and_keeps_what_was_there(
    db_url: str, hub: FakeGitHub, rollback: Callable[..., Done]
) -> None:
    hub.make_repo("old")
    hub.write_file(f"{USER}/old", "README.md", "from before the run")
    with reversi.open(db_url, manifests=[str(GITHUB_MANIFEST)]) as ledger:
        run_id = _github_run(ledger)

    done = rollback(run_id, GITHUB_MANIFEST)

    assert done.code == 0, done.err + done.out
    assert done.json()["compensated"] == [3, 2, 1, 0]
    assert list(hub.repos) == [f"{USER}/old"]
    assert list(hub.files[f"{USER}/old"]) == ["README.md"]
    assert hub.issues[f"{USER}/old"][1]["state"] == "closed"
    assert hub.issues[f"{USER}/old"][1]["state_reason"] == "not_planned"


def test_a_file_edited_since_is_not_deleted_and_its_repository_waits(
    db_url: str, hub: FakeGitHub, rollback: Callable[..., Done], plan: Callable[[str, Path], Done]
) -> None:
    with reversi.open(db_url, manifests=[str(GITHUB_MANIFEST)]) as ledger:
        run = ledger.start_run()
        repo = run.call("github.create_repo", {"name": "shared"}, github.create_repo)
        made = run.call("github.create_file", {"repo": repo["full_name"], "path": "a.txt", "content": "v1",
                                               "message": "Add"}, github.create_file)
    edited = hub.write_file(repo["full_name"], "a.txt", "a colleague's v2")

    done = rollback(run.id, GITHUB_MANIFEST)

    assert done.code == 2
    report = done.json()
    assert report["failed"][0]["error"] == (f"changed since step 1: a.txt in {USER}/shared now has blob"
                                            f" {edited['sha']}, the step left {made['content']['sha']}")
    assert report["deferred"] == [{"step": 0, "blocked_by": [1]}]
    assert f"{USER}/shared" in hub.repos and hub.files[f"{USER}/shared"]["a.txt"] == edited
    # both still stand: the plan (which assumes undos succeed) offers both again
    assert [a["kind"] for a in plan(run.id, GITHUB_MANIFEST).json()["actions"]] == ["compensate", "compensate"]


def test_a_repository_made_again_under_the_same_name_is_not_the_steps_to_delete(
    db_url: str, hub: FakeGitHub, rollback: Callable[..., Done]
) -> None:
    """The step made repository scratch; someone deleted it and made another of that name since. The undo
    matches by id, not by name, and leaves the newcomer (and its issue) alone."""
    with reversi.open(db_url, manifests=[str(GITHUB_MANIFEST)]) as ledger:
        run = ledger.start_run()
        made = run.call("github.create_repo", {"name": "scratch"}, github.create_repo)
        issue = run.call("github.create_issue", {"repo": made["full_name"], "title": "Plan"}, github.create_issue)
    del hub.repos[made["full_name"]]
    again = hub.make_repo("scratch")
    hub.issues[made["full_name"]][1] = {"id": 1, "number": 1, "title": "theirs", "state": "open",
                                        "state_reason": None}

    done = rollback(run.id, GITHUB_MANIFEST)

    assert done.code == 2
    errors = {f["step"]: f["error"] for f in done.json()["failed"]}
    assert errors[1] == (f"changed since step 1: issue 1 of {made['full_name']} is not the one the step made"
                         f" (id 1, the step made {issue['id']})")
    assert hub.repos[made["full_name"]] == again and hub.issues[made["full_name"]][1]["state"] == "open"
    assert not hub.effects


def test_a_repository_made_again_since_the_step_is_left_standing(
    db_url: str, hub: FakeGitHub, rollback: Callable[..., Done]
) -> None:
    with reversi.open(db_url, manifests=[str(GITHUB_MANIFEST)]) as ledger:
        run = ledger.start_run()
        made = run.call("github.create_repo", {"name": "scratch"}, github.create_repo)
    del hub.repos[made["full_name"]]
    again = hub.make_repo("scratch")

    done = rollback(run.id, GITHUB_MANIFEST)

    assert done.code == 2
    assert done.json()["failed"][0]["error"] == (
        f"changed since step 0: the repository {made['full_name']} is not the one the step made"
        f" (id {again['id']}, the step made {made['id']})")
    assert hub.repos[made["full_name"]] == again and not hub.effects


def test_each_github_compensation_repeated_reads_first_and_does_nothing_twice(
    db_url: str, hub: FakeGitHub, plan: Callable[[str, Path], Done]
) -> None:
    hub.make_repo("old")
    with reversi.open(db_url, manifests=[str(GITHUB_MANIFEST)]) as ledger:
        run_id = _github_run(ledger)
    for call in compensation_calls(plan(run_id, GITHUB_MANIFEST).json()):
        first = connectors_cli("compensate", stdin=json.dumps(call))
        again = connectors_cli("compensate", stdin=json.dumps({**call, "attempt": 2}))
        assert first.code == again.code == 0, first.err + again.err
        assert json.loads(again.out) == json.loads(first.out)
    assert sorted(hub.effects.values()) == [1, 1, 1, 1]


def test_github_errors_name_the_status_and_githubs_message(hub: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.make_repo("taken")
    with pytest.raises(DownstreamError, match=r"^GitHub POST /user/repos: HTTP 422: Repository creation failed\.; "
                                              r"name already exists on this account$"):
        github.create_repo(name="taken")
    with pytest.raises(DownstreamError, match=r"HTTP 404: Not Found$"):
        github.get_issue(repo=f"{USER}/nothing", number=1)
    mine = github.create_repo(name="mine")
    hub.fail_next(f"GET /repos/{USER}/mine", 503, {"message": "Service Unavailable"})
    with pytest.raises(DownstreamError, match=r"HTTP 503: Service Unavailable$"):
        github.delete_repo(mine)
    assert f"{USER}/mine" in hub.repos
    monkeypatch.setenv("GITHUB_TOKEN", "wrong")
    with pytest.raises(DownstreamError, match=r"HTTP 401: Bad credentials$"):
        github.get_repo(full_name=f"{USER}/taken")


def test_a_slack_rollback_deletes_the_runs_messages_and_keeps_the_others(
    db_url: str, chat: FakeSlack, rollback: Callable[..., Done]
) -> None:
    earlier = chat.post_now(CHANNEL, "posted before the run")
    with reversi.open(db_url, manifests=[str(SLACK_MANIFEST)]) as ledger:
        run = ledger.start_run()
        run.call("slack.post_message", {"channel": CHANNEL, "text": "Deploy started"}, slack.post_message)
        run.call("slack.post_message", {"channel": CHANNEL, "text": "in thread", "thread_ts": earlier["ts"]},
                 slack.post_message)

    done = rollback(run.id, SLACK_MANIFEST)

    assert done.code == 0, done.err + done.out
    assert list(chat.messages[CHANNEL]) == [earlier["ts"]]


def test_a_message_people_replied_to_is_not_deleted(
    db_url: str, chat: FakeSlack, rollback: Callable[..., Done], plan: Callable[[str, Path], Done]
) -> None:
    with reversi.open(db_url, manifests=[str(SLACK_MANIFEST)]) as ledger:
        run = ledger.start_run()
        posted = run.call("slack.post_message", {"channel": CHANNEL, "text": "Lunch?"}, slack.post_message)
    chat.post_now(CHANNEL, "yes!", thread_ts=posted["ts"])

    done = rollback(run.id, SLACK_MANIFEST)

    assert done.code == 2
    assert done.json()["failed"][0]["error"] == f"changed since step 0: message {posted['ts']} in {CHANNEL} has 1 reply"
    assert posted["ts"] in chat.messages[CHANNEL]
    assert [a["kind"] for a in plan(run.id, SLACK_MANIFEST).json()["actions"]] == ["compensate"]


def test_a_slack_delete_repeated_finds_the_message_gone_and_answers_the_same(
    db_url: str, chat: FakeSlack, plan: Callable[[str, Path], Done]
) -> None:
    with reversi.open(db_url, manifests=[str(SLACK_MANIFEST)]) as ledger:
        run = ledger.start_run()
        run.call("slack.post_message", {"channel": CHANNEL, "text": "oops"}, slack.post_message)
    [call] = compensation_calls(plan(run.id, SLACK_MANIFEST).json())
    first = connectors_cli("compensate", stdin=json.dumps(call))
    again = connectors_cli("compensate", stdin=json.dumps(call))
    assert first.code == again.code == 0 and json.loads(first.out) == json.loads(again.out)
    assert list(chat.effects.values()) == [1]


def test_slack_errors_over_http_200_and_rate_limits_are_failures_naming_them(
    chat: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(DownstreamError, match=r"^Slack chat\.postMessage: channel_not_found$"):
        slack.post_message(channel="C_NOPE", text="hi")
    retry_after = {"Retry-After": "30"}
    chat.fail_next("POST /chat.postMessage", 429, {"ok": False, "error": "ratelimited"}, 1, **retry_after)
    with pytest.raises(DownstreamError, match=r"HTTP 429 \(rate limited, retry after 30 s\): ratelimited$"):
        slack.post_message(channel=CHANNEL, text="hi")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-wrong")
    with pytest.raises(DownstreamError, match="invalid_auth"):
        slack.get_message(channel=CHANNEL, ts="1.0")
    assert chat.messages[CHANNEL] == {}


def test_forged_results_make_no_github_compensation_delete_or_close_anything(hub: FakeGitHub) -> None:
    hub.make_repo("victim")
    victim_issue = github.create_issue(repo=f"{USER}/victim", title="someone's issue")
    victim_file = hub.write_file(f"{USER}/victim", "precious.txt", "someone's work")
    repo = github.create_repo(name="scratch")
    issue = github.create_issue(repo=repo["full_name"], title="mine")
    made = github.create_file(repo=repo["full_name"], path="a.txt", content="mine", message="Add")
    cases = [
        ("github.delete_repo", repo, {"full_name": f"{USER}/victim"}, issue),
        ("github.close_issue", issue, {"repo": f"{USER}/victim", "number": victim_issue["number"]}, repo),
        ("github.delete_file", made, {"repo": f"{USER}/victim", "path": "precious.txt",
                                      "content": {"sha": victim_file["sha"]}}, issue),
    ]
    for compensation, genuine, victim, other in cases:
        for forged in forgeries(genuine, victim, other).values():
            assert_refused(compensation, forged, hub)
    assert f"{USER}/victim" in hub.repos and hub.files[f"{USER}/victim"]["precious.txt"] == victim_file
    assert hub.issues[f"{USER}/victim"][victim_issue["number"]]["state"] == "open" and not hub.effects


def test_forged_results_make_slack_delete_no_message(chat: FakeSlack) -> None:
    someone = chat.post_now(CHANNEL, "someone else's message")
    posted, other = slack.post_message(channel=CHANNEL, text="mine"), slack.post_message(channel=CHANNEL, text="2")
    for forged in forgeries(posted, {"ts": someone["ts"]}, {**other, "reversi_seal": {
            **other["reversi_seal"], "tool": "github.create_repo"}}).values():
        assert_refused("slack.delete_message", forged, chat)
    assert someone["ts"] in chat.messages[CHANNEL] and not chat.effects
