"""The `github` connector: repositories, issues and files over GitHub's REST API (v3).

Requests go to `GITHUB_API_URL` (default https://api.github.com) with `GITHUB_TOKEN`. GitHub has no
idempotency header, so every undo reads first: a repository or file already gone, or an issue
already closed, is already undone, and the undo answers as it did the first time. An undo that finds
a file's blob changed since does not delete someone's work.
"""

from __future__ import annotations

import base64
import re
from typing import Any
from urllib.parse import quote

from reversi.connectors._base import STEP, Connector, Param, Setting, Tool
from reversi.connectors._base import ToolKind as Kind
from reversi.connectors._http import Service
from reversi.errors import BadArgument, ChangedSince

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


def _message(body: Any) -> str | None:
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


# --- forward -----------------------------------------------------------------------------------


def create_repo(name: str, description: str | None = None, private: bool = False, org: str | None = None) -> Any:
    """Create a repository (the token's user's, or `org`'s). Undo: `github.delete_repo`."""
    if not _NAME.fullmatch(name) or (org is not None and not _NAME.fullmatch(org)):
        raise BadArgument("name" if not _NAME.fullmatch(name) else "org", "not a valid GitHub name")
    body = {"name": name, "description": description, "private": private}
    return GITHUB.request("POST", f"/orgs/{org}/repos" if org else "/user/repos", json=body).body


def create_issue(repo: str, title: str, body: str | None = None, labels: list[str] | None = None) -> Any:
    """Open an issue. Undo: `github.close_issue` (closed as not planned; it stays visible)."""
    fields = {"title": title, "body": body, "labels": labels}
    return GITHUB.request("POST", f"{_repo(repo)}/issues", json={k: v for k, v in fields.items() if v is not None}).body


def create_file(repo: str, path: str, content: str, message: str, branch: str | None = None) -> Any:
    """Add a new file (text) in one commit. Undo: `github.delete_file`, while the file is unchanged."""
    body = {"message": message, "content": base64.b64encode(content.encode()).decode(), "branch": branch}
    answer = GITHUB.request("PUT", _contents(repo, path), json={k: v for k, v in body.items() if v is not None})
    return {**answer.body, "repo": repo, "path": path, "branch": branch}


# --- compensations -----------------------------------------------------------------------------


def delete_repo(full_name: str, step: int | None = None) -> dict[str, Any]:
    """Delete the repository the step created; one already gone is already undone."""
    path = _repo(full_name, "full_name")
    if GITHUB.request("GET", path, tolerate=(404,)).status != 404:
        GITHUB.request("DELETE", path, tolerate=(404,))
    return {"deleted": full_name}


def close_issue(repo: str, number: int, step: int | None = None) -> dict[str, Any]:
    """Close the issue as not planned; one already closed is left as it is."""
    path = f"{_repo(repo)}/issues/{number}"
    if GITHUB.request("GET", path).body.get("state") != "closed":
        GITHUB.request("PATCH", path, json={"state": "closed", "state_reason": "not_planned"})
    return {"repo": repo, "number": number, "state": "closed"}


def delete_file(repo: str, path: str, sha: str, branch: str | None = None, step: int | None = None) -> dict[str, Any]:
    """Delete the file the step added, only while its blob is still the one the step wrote.

    Raises:
        ChangedSince: someone changed the file since.
    """
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


def get_repo(full_name: str) -> dict[str, Any]:
    """The repository with `found: true`, or `{"found": false}`."""
    found = GITHUB.request("GET", _repo(full_name, "full_name"), tolerate=(404,))
    return {"found": False, "full_name": full_name} if found.status == 404 else {"found": True, **found.body}


def get_issue(repo: str, number: int) -> Any:
    """The issue (its `state`, `state_reason`)."""
    return GITHUB.request("GET", f"{_repo(repo)}/issues/{number}").body


def get_file(repo: str, path: str, branch: str | None = None) -> dict[str, Any]:
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
        Tool("github.delete_repo", Kind.COMPENSATION, delete_repo, "Delete a repository.", (_FULL, STEP),
             destructive=True, idempotent=True),
        Tool("github.close_issue", Kind.COMPENSATION, close_issue, "Close an issue as not planned.",
             (_REPO, _NUMBER, STEP), idempotent=True),
        Tool("github.delete_file", Kind.COMPENSATION, delete_file, "Delete a file while it is unchanged.",
             (_REPO, _PATH, Param("sha", "string", "the blob the step wrote"), _BRANCH, STEP),
             destructive=True, idempotent=True),
        Tool("github.get_repo", Kind.READ, get_repo, "A repository, or found: false.", (_FULL,)),
        Tool("github.get_issue", Kind.READ, get_issue, "An issue.", (_REPO, _NUMBER)),
        Tool("github.get_file", Kind.READ, get_file, "A file's blob sha, or found: false.", (_REPO, _PATH, _BRANCH)),
    ),
)
