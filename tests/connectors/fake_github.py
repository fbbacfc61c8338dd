"""A fake of GitHub's REST API (v3) as documented: Bearer tokens, `{"message": "Not Found",
"documentation_url", "status"}` for 404 (and 401 "Bad credentials"), 422 "Validation Failed" with
its `errors` list, 201 on create, 204 on delete, and the contents API's sha checks."""

from __future__ import annotations

import base64
import hashlib
import itertools
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reversi.demo.fakes.base import FakeBase, bearer

TOKEN = "ghp_fake"
USER = "octo"
DOCS = "https://docs.github.com/rest"


def github_error(status: int, message: str, errors: list[dict[str, str]] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"message": message, "documentation_url": DOCS, "status": str(status)}
    if errors:
        body["errors"] = errors
    return JSONResponse(body, status)


def _not_found() -> JSONResponse:
    return github_error(404, "Not Found")


@dataclass
class FakeGitHub(FakeBase):
    repos: dict[str, dict[str, Any]] = field(default_factory=dict)
    issues: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    files: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))

    def app(self) -> Starlette:
        routes = [
            Route("/user/repos", self.create_repo, methods=["POST"]),
            Route("/repos/{owner}/{name}", self.repo, methods=["GET", "DELETE"]),
            Route("/repos/{owner}/{name}/issues", self.create_issue, methods=["POST"]),
            Route("/repos/{owner}/{name}/issues/{number:int}", self.issue, methods=["GET", "PATCH"]),
            Route("/repos/{owner}/{name}/contents/{path:path}", self.contents, methods=["GET", "PUT", "DELETE"]),
        ]
        return Starlette(routes=[Route(r.path, self._signed(r.endpoint), methods=r.methods) for r in routes])

    def _signed(self, endpoint: Any) -> Any:
        async def handle(request: Request) -> Response:
            if not bearer(request, TOKEN):
                return github_error(401, "Bad credentials")
            response: Response = await endpoint(request)
            return response

        return handle

    def make_repo(self, name: str) -> dict[str, Any]:
        full = f"{USER}/{name}"
        self.repos[full] = {"id": next(self.ids), "name": name, "full_name": full, "private": False,
                            "owner": {"login": USER}, "html_url": f"https://github.com/{full}",
                            "default_branch": "main"}
        self.issues[full], self.files[full] = {}, {}
        return self.repos[full]

    async def create_repo(self, request: Request) -> Response:
        body = await request.json()
        if f"{USER}/{body.get('name')}" in self.repos:
            return github_error(422, "Repository creation failed.", [{"resource": "Repository", "code": "custom",
                                "field": "name", "message": "name already exists on this account"}])
        return JSONResponse(self.make_repo(body["name"]), 201)

    async def repo(self, request: Request) -> Response:
        full = f"{request.path_params['owner']}/{request.path_params['name']}"
        if full not in self.repos:
            return _not_found()
        if request.method == "DELETE":
            self.effects[f"delete {full}"] += 1
            del self.repos[full]
            return Response(status_code=204)
        return JSONResponse(self.repos[full])

    async def create_issue(self, request: Request) -> Response:
        full = f"{request.path_params['owner']}/{request.path_params['name']}"
        if full not in self.repos:
            return _not_found()
        body = await request.json()
        if not body.get("title"):
            return github_error(422, "Validation Failed", [{"resource": "Issue", "code": "missing_field",
                                                            "field": "title"}])
        number = len(self.issues[full]) + 1
        self.issues[full][number] = {"id": next(self.ids), "number": number, "title": body["title"],
                                     "state": "open", "state_reason": None}
        return JSONResponse(self.issues[full][number], 201)

    async def issue(self, request: Request) -> Response:
        full = f"{request.path_params['owner']}/{request.path_params['name']}"
        found = self.issues.get(full, {}).get(request.path_params["number"])
        if found is None:
            return _not_found()
        if request.method == "PATCH":
            body = await request.json()
            if body.get("state") == "closed" and found["state"] != "closed":
                self.effects[f"close {full}#{found['number']}"] += 1
            found.update({k: body[k] for k in ("state", "state_reason", "title") if k in body})
        return JSONResponse(found)

    def write_file(self, full: str, path: str, text: str) -> dict[str, Any]:
        """A commit someone made (not through the connector)."""
        sha = hashlib.sha1(f"blob {len(text)}\0{text}".encode()).hexdigest()
        self.files[full][path] = {"name": path.rsplit("/", 1)[-1], "path": path, "sha": sha, "type": "file",
                                  "content": base64.b64encode(text.encode()).decode()}
        return self.files[full][path]

    async def contents(self, request: Request) -> Response:
        full = f"{request.path_params['owner']}/{request.path_params['name']}"
        path = request.path_params["path"]
        if full not in self.files:
            return _not_found()
        found = self.files[full].get(path)
        if request.method == "GET":
            return JSONResponse(found) if found else _not_found()
        body = await request.json()
        if request.method == "PUT":
            if found and body.get("sha") != found["sha"]:
                return github_error(422, 'Invalid request.\n\n"sha" wasn\'t supplied.')
            made = self.write_file(full, path, base64.b64decode(body["content"]).decode())
            commit = {"sha": hashlib.sha1(f"commit {path}".encode()).hexdigest(), "message": body.get("message")}
            return JSONResponse({"content": made, "commit": commit}, 201)
        if found is None:
            return _not_found()
        if body.get("sha") != found["sha"]:
            return github_error(409, f"{path} does not match {body.get('sha')}")
        self.effects[f"delete {full}/{path}"] += 1
        del self.files[full][path]
        return JSONResponse({"content": None, "commit": {"sha": "0" * 40}})
