"""The `github` connector: repositories, issues and files over GitHub's REST API (v3).

Requests go to `GITHUB_API_URL` (default https://api.github.com) with `GITHUB_TOKEN`. GitHub has no
idempotency header, so every undo reads first: a repository or file already gone, or an issue
already closed, is already undone, and the undo answers as it did the first time. An undo that finds
a file's blob changed since does not delete someone's work.

Each forward result comes back sealed (`reversi.connectors._seal`) with the arguments its undo needs;
each compensation takes that whole result and acts only on the repository, issue or file its seal
covers, so a forged or altered result deletes and closes nothing.
"""

from __future__ import annotations

import base64
import re
from urllib.parse import quote

from reversi.connectors._base import STEP, Connector, Param, Setting, Tool, sealed_result
from reversi.connectors._base import ToolKind as Kind
from reversi.connectors._http import Service
from reversi.connectors._seal import Sealed, sealed, unseal
from reversi.core.json_values import JSONObject, JSONObjectView, LooseJSON, LooseJSONObject
from reversi.errors import BadArgument, ChangedSince, DownstreamError, UntrustedResult

__all__ = [
    "CONNECTOR",
    "close_issue",
    "create_file",
    "create_issue",
    "create_repo",
    "delete_file",
    "delete_repo",
    "get_file",
    "get_issue",
    "get_repo",
]


def _message(body: LooseJSON) -> str | None:
    if not isinstance(body, dict) or "message" not in body:
        return None
    details = [e.get("message") or f"{e.get('field')} {e.get('code')}"
               for e in body.get("errors") or [] if isinstance(e, dict)]
    return "; ".join([" ".join(str(body["message"]).split()), *map(str, details)])


GITHUB = Service(
    "GitHub",
    Setting("GITHUB_API_URL", "GitHub's REST API", "https://api.github.com"),
    Setting("GITHUB_TOKEN", "a token allowed to do what the tools do (delete_repo needs its scope)",
            "none: required"),
    _message,
    extra_headers=(("Accept", "application/vnd.github+json"), ("X-GitHub-Api-Version", "2022-11-28")),
)
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")


def _repo(full_name: str, argument: str = "repo") -> str:
    owner, slash, name = full_name.partition("/")
    if not slash or not _NAME.fullmatch(owner) or not _NAME.fullmatch(name) or name in (".", ".."):
        raise BadArgument(argument, f"{full_name!r} is not OWNER/NAME")
    return f"/repos/{owner}/{name}"


def _contents(repo: str, path: str) -> str:
    parts = path.strip("/").split("/")
    if not path.strip("/") or any(part in ("", ".", "..") for part in parts):
        raise BadArgument("path", f"{path!r} is not a path in a repository")
    return f"{_repo(repo)}/contents/{'/'.join(quote(part, safe='') for part in parts)}"


def _created(method: str, path: str, body: LooseJSONObject) -> JSONObject:
    made = GITHUB.request(method, path, json={k: v for k, v in body.items() if v is not None}).body
    if not isinstance(made, dict):
        raise DownstreamError(f"GitHub {method} {path}: the answer is not an object")
    return made


def _opened(result: LooseJSON, tool: str, *fields: str) -> Sealed:
    """The sealed result of `tool`, once it has each of `fields` (in its kept arguments or its result).

    Raises:
        UntrustedResult: the result is not one `tool` of this connector made.
    """
    opened = unseal(result, {tool})
    for name in fields:
        if opened.args.get(name, opened.result.get(name)) is None:
            raise UntrustedResult(f"the sealed result of {tool} has no {name}")
    return opened


# --- forward -----------------------------------------------------------------------------------


@sealed("github.create_repo")
def create_repo(name: str, description: str | None = None, private: bool = False,
                org: str | None = None) -> JSONObject:
    """Create a repository (the token's user's, or `org`'s). Undo: `github.delete_repo`."""
    if not _NAME.fullmatch(name) or (org is not None and not _NAME.fullmatch(org)):
        raise BadArgument("name" if not _NAME.fullmatch(name) else "org", "not a valid GitHub name")
    body = {"name": name, "description": description, "private": private}
    return _created("POST", f"/orgs/{org}/repos" if org else "/user/repos", body)


@sealed("github.create_issue", keep=("repo",))
def create_issue(repo: str, title: str, body: str | None = None, labels: list[str] | None = None) -> JSONObject:
    """Open an issue. Undo: `github.close_issue` (closed as not planned; it stays visible)."""
    return _created("POST", f"{_repo(repo)}/issues", {"title": title, "body": body, "labels": labels})


@sealed("github.create_file", keep=("repo", "path", "branch"))
def create_file(repo: str, path: str, content: str, message: str, branch: str | None = None) -> JSONObject:
    """Add a new file (text) in one commit. Undo: `github.delete_file`, while the file is unchanged."""
    body = {"message": message, "content": base64.b64encode(content.encode()).decode(), "branch": branch}
    return {**_created("PUT", _contents(repo, path), body), "repo": repo, "path": path, "branch": branch}


# --- compensations -----------------------------------------------------------------------------


def delete_repo(result: JSONObjectView, step: int | None = None) -> JSONObject:
    """Delete the repository `result` (the sealed result of `github.create_repo`) names; one already
    gone is already undone.

    Raises:
        UntrustedResult: the result is not one this connector's `github.create_repo` made.
    """
    made = _opened(result, "github.create_repo", "full_name", "id").result
    full_name = str(made["full_name"])
    path = _repo(full_name, "full_name")
    found = GITHUB.request("GET", path, tolerate=(404,))
    if found.status != 404:
        _same(found.body, made["id"], step, f"the repository {full_name}")
        GITHUB.request("DELETE", path, tolerate=(404,))
    return {"deleted": full_name}


def _same(found: LooseJSON, made_id: LooseJSON, step: int | None, what: str) -> None:
    """Raises ChangedSince unless `found` (GitHub's answer now) is the object the step made (by its id):
    a name or number reused since, by a repository made again or moved, is not the step's to undo."""
    now = found.get("id") if isinstance(found, dict) else None
    if now != made_id:
        raise ChangedSince(step, f"{what} is not the one the step made (id {now}, the step made {made_id})")


def close_issue(result: JSONObjectView, step: int | None = None) -> JSONObject:
    """Close the issue `result` (the sealed result of `github.create_issue`) names, as not planned; one
    already closed is left as it is.

    Raises:
        UntrustedResult: the result is not one this connector's `github.create_issue` made.
    """
    opened = _opened(result, "github.create_issue", "repo", "number", "id")
    repo, number = str(opened.args["repo"]), opened.result["number"]
    if not isinstance(number, int) or isinstance(number, bool):
        raise UntrustedResult("the sealed result of github.create_issue has no issue number")
    path = f"{_repo(repo)}/issues/{number}"
    found = GITHUB.request("GET", path).body
    _same(found, opened.result["id"], step, f"issue {number} of {repo}")
    if found.get("state") != "closed":
        GITHUB.request("PATCH", path, json={"state": "closed", "state_reason": "not_planned"})
    return {"repo": repo, "number": number, "state": "closed"}


def delete_file(result: JSONObjectView, step: int | None = None) -> JSONObject:
    """Delete the file `result` (the sealed result of `github.create_file`) names, only while its blob
    is still the one the step wrote.

    Raises:
        UntrustedResult: the result is not one this connector's `github.create_file` made.
        ChangedSince: someone changed the file since.
    """
    opened = _opened(result, "github.create_file", "repo", "path", "content")
    repo, path, branch = str(opened.args["repo"]), str(opened.args["path"]), opened.args.get("branch")
    sha = opened.result["content"].get("sha") if isinstance(opened.result["content"], dict) else None
    if not isinstance(sha, str):
        raise UntrustedResult("the sealed result of github.create_file names no blob")
    where = _contents(repo, path)
    found = GITHUB.request("GET", where, params={"ref": branch} if branch else None, tolerate=(404,))
    if found.status != 404:
        now = found.body.get("sha") if isinstance(found.body, dict) else None
        if now != sha:
            raise ChangedSince(step, f"{path} in {repo} now has blob {now}, the step left {sha}")
        body = {"message": f"Undo: remove {path}", "sha": sha, **({"branch": branch} if branch else {})}
        GITHUB.request("DELETE", where, json=body, tolerate=(404,))
    return {"repo": repo, "path": path, "deleted": True}


# --- reads -------------------------------------------------------------------------------------


def get_repo(full_name: str) -> JSONObject:
    """The repository with `found: true`, or `{"found": false}`."""
    found = GITHUB.request("GET", _repo(full_name, "full_name"), tolerate=(404,))
    return {"found": False, "full_name": full_name} if found.status == 404 else {"found": True, **found.body}


def get_issue(repo: str, number: int) -> LooseJSON:
    """The issue (its `state`, `state_reason`)."""
    return GITHUB.request("GET", f"{_repo(repo)}/issues/{number}").body


def get_file(repo: str, path: str, branch: str | None = None) -> JSONObject:
    """`{"found", "sha"}` of a file (without its content)."""
    found = GITHUB.request("GET", _contents(repo, path), params={"ref": branch} if branch else None, tolerate=(404,))
    sha = found.body.get("sha") if found.status != 404 and isinstance(found.body, dict) else None
    return {"repo": repo, "path": path, "found": found.status != 404, "sha": sha}


_REPO = Param("repo", "string", "OWNER/NAME")
_FULL = Param("full_name", "string", "OWNER/NAME")
_NUMBER = Param("number", "integer", "the issue's number")
_PATH = Param("path", "string", "the file's path in the repository")
_BRANCH = Param("branch", "string", "the branch (default: the repository's default)", required=False,
                nullable=True)

CONNECTOR = Connector(
    name="github",
    description="GitHub repositories, issues and files",
    settings=GITHUB.settings,
    tools=(
        Tool("github.create_repo", Kind.FORWARD, create_repo, "Create a repository.",
             (Param("name", "string", "the repository's name"),
              Param("description", "string", "its description", required=False),
              Param("private", "boolean", "private (default false)", required=False),
              Param("org", "string", "an organization (default: the token's user)", required=False))),
        Tool("github.create_issue", Kind.FORWARD, create_issue, "Open an issue.",
             (_REPO, Param("title", "string", "the title"), Param("body", "string", "the text", required=False),
              Param("labels", "array", "label names", required=False))),
        Tool("github.create_file", Kind.FORWARD, create_file, "Add a new file in one commit.",
             (_REPO, _PATH, Param("content", "string", "the text"), Param("message", "string", "the commit message"),
              _BRANCH)),
        Tool("github.delete_repo", Kind.COMPENSATION, delete_repo, "Delete a repository.",
             (sealed_result("github.create_repo"), STEP), destructive=True, idempotent=True),
        Tool("github.close_issue", Kind.COMPENSATION, close_issue, "Close an issue as not planned.",
             (sealed_result("github.create_issue"), STEP), idempotent=True),
        Tool("github.delete_file", Kind.COMPENSATION, delete_file, "Delete a file while it is unchanged.",
             (sealed_result("github.create_file"), STEP), destructive=True, idempotent=True),
        Tool("github.get_repo", Kind.READ, get_repo, "A repository, or found: false.", (_FULL,)),
        Tool("github.get_issue", Kind.READ, get_issue, "An issue.", (_REPO, _NUMBER)),
        Tool("github.get_file", Kind.READ, get_file, "A file's blob sha, or found: false.", (_REPO, _PATH, _BRANCH)),
    ),
)
