"""The demo's stand-in downstream world: a JSON file of charges, repositories and emails, plus real files.

The agent's calls change it (`create_charge`, `create_repo`, `write_file`, `send_email`); the bundled
compensator undoes them (`compensate`) and the bundled reader reads them back (`read`). Compensations
are remembered by idempotency key in the file itself, so a repeated call does nothing twice, as a
real API that honours an idempotency key would.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

# Where the agent may write real files, relative to the demo's folder; the compensator deletes nothing outside it.
OUTPUT_DIR = "demo-output"


class WorldError(Exception):
    """A call the stand-in world refuses (unknown tool, missing object, a path outside the demo's output)."""


def _empty(root: Path) -> dict[str, Any]:
    return {"root": str(root), "charges": {}, "refunds": {}, "repos": {}, "outbox": [], "compensations": {}}


class World:
    """The world file at `path`; every method reads it, changes it and writes it back whole."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def reset(cls, path: Path, root: Path) -> World:
        """Start afresh: an empty world whose real files live under `root`/demo-output."""
        path.parent.mkdir(parents=True, exist_ok=True)
        world = cls(path)
        world.save(_empty(root))
        return world

    def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise WorldError(f"cannot read the demo world {self.path}: {exc}") from exc
        if not isinstance(data, dict):
            raise WorldError(f"{self.path} is not a demo world")
        return data

    def save(self, data: Mapping[str, Any]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)

    @property
    def root(self) -> Path:
        return Path(self.load()["root"])

    def output_path(self, relative: str) -> Path:
        """`relative` (as the agent wrote it) under the demo's folder, refused unless inside demo-output."""
        root = self.root
        path = (root / relative).resolve()
        if not path.is_relative_to((root / OUTPUT_DIR).resolve()):
            raise WorldError(f"{relative} is outside {OUTPUT_DIR}/: the demo touches nothing else")
        return path

    # -- the agent's calls ---------------------------------------------------------------------

    def create_charge(self, customer: str, amount: int, currency: str, description: str) -> dict[str, Any]:
        data = self.load()
        charge = {
            "id": f"ch_{len(data['charges']) + 1:04d}",
            "customer": customer,
            "amount": amount,
            "currency": currency,
            "description": description,
            "status": "succeeded",
            "refunded": False,
        }
        data["charges"][charge["id"]] = charge
        self.save(data)
        return dict(charge)

    def create_repo(self, org: str, name: str, private: bool, clone_to: str) -> dict[str, Any]:
        checkout = self.output_path(clone_to)
        checkout.mkdir(parents=True, exist_ok=True)
        data = self.load()
        repo = {"full_name": f"{org}/{name}", "private": private, "clone_path": clone_to, "deleted": False}
        data["repos"][repo["full_name"]] = repo
        self.save(data)
        return {**repo, "html_url": f"https://github.example/{org}/{name}"}

    def write_file(self, path: str, content: str) -> dict[str, Any]:
        target = self.output_path(path)
        if not target.parent.is_dir():
            raise WorldError(f"{Path(path).parent} does not exist: create the repository first")
        target.write_text(content, encoding="utf-8")
        return {"path": path, "bytes": len(content.encode())}

    def send_email(self, to: str, subject: str, body: str) -> dict[str, Any]:
        data = self.load()
        message = {"id": f"msg_{len(data['outbox']) + 1:04d}", "to": to, "subject": subject, "status": "sent"}
        data["outbox"].append({**message, "body": body})
        self.save(data)
        return message

    def find_charges(self, customer: str, description: str) -> list[dict[str, Any]]:
        """What an operator searching the dashboard would find."""
        charges = self.load()["charges"].values()
        return [c for c in charges if c["customer"] == customer and c["description"] == description]

    # -- undo and read-back ----------------------------------------------------------------------

    def compensate(self, call: Mapping[str, Any]) -> Any:
        """Run one compensation (the call JSON of a `--compensator-cmd`); a known key does nothing again.

        Raises:
            WorldError: an unknown tool, bad arguments, or an object that cannot be undone.
        """
        key = call.get("idempotency_key")
        tool = call.get("tool")
        args = call.get("args")
        if not isinstance(key, str) or not key or not isinstance(tool, str) or not isinstance(args, dict):
            raise WorldError("expected the call JSON: {tool, args, idempotency_key, ...}")
        remembered = self.load()["compensations"]
        if key in remembered:
            return remembered[key]
        undo = _UNDO.get(tool)
        if undo is None:
            raise WorldError(f"unknown tool: {tool}")
        result = undo(self, args)
        data = self.load()
        data["compensations"][key] = result
        self.save(data)
        return result

    def read(self, tool: str, arguments: Any) -> Any:
        """Answer a read-back (a `--reader-cmd` call).

        Raises:
            WorldError: an unknown tool or a missing object.
        """
        if tool == "stripe.get_charge" and isinstance(arguments, dict):
            charge = self.load()["charges"].get(arguments.get("id"))
            if charge is None:
                raise WorldError(f"no such charge: {arguments.get('id')}")
            return charge
        if tool == "github.get_repo" and isinstance(arguments, dict):
            repo = self.load()["repos"].get(arguments.get("full_name"))
            if repo is None:
                raise WorldError(f"no such repository: {arguments.get('full_name')}")
            return repo
        raise WorldError(f"unknown tool: {tool}")


def _refund(world: World, args: Mapping[str, Any]) -> dict[str, Any]:
    data = world.load()
    charge = data["charges"].get(args.get("charge_id"))
    if charge is None:
        raise WorldError(f"no such charge: {args.get('charge_id')}")
    if charge["refunded"]:
        raise WorldError(f"charge {charge['id']} is already refunded")
    refund = {
        "id": f"re_{len(data['refunds']) + 1:04d}",
        "charge": charge["id"],
        "amount": args.get("amount", charge["amount"]),
        "status": "succeeded",
    }
    data["refunds"][refund["id"]] = refund
    charge.update(refunded=True, refund=refund["id"])
    world.save(data)
    return refund


def _delete_repo(world: World, args: Mapping[str, Any]) -> dict[str, Any]:
    data = world.load()
    repo = data["repos"].get(args.get("full_name"))
    if repo is None:
        raise WorldError(f"no such repository: {args.get('full_name')}")
    checkout = world.output_path(str(args.get("clone_path", repo["clone_path"])))
    if checkout.is_dir():
        if any(checkout.iterdir()):
            raise WorldError(f"the checkout {repo['clone_path']} is not empty: undo the files in it first")
        checkout.rmdir()
    repo["deleted"] = True
    world.save(data)
    return {"deleted": repo["full_name"]}


def _delete_file(world: World, args: Mapping[str, Any]) -> dict[str, Any]:
    path = str(args.get("path", ""))
    target = world.output_path(path)
    existed = target.is_file()
    target.unlink(missing_ok=True)
    return {"deleted": path, "existed": existed}


_UNDO: dict[str, Callable[[World, Mapping[str, Any]], dict[str, Any]]] = {
    "stripe.refund": _refund,
    "github.delete_repo": _delete_repo,
    "fs.delete_file": _delete_file,
}


def command_main(
    name: str, usage: str, answer: Callable[[World, dict[str, Any]], Any], argv: Sequence[str] | None
) -> int:
    """What the bundled commands share: `WORLD_JSON` as the argument, a JSON object on stdin, the
    answer as JSON on stdout, and exit 1 with the reason on stderr when the world refuses."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print(f"usage: {usage}", file=sys.stderr)
        return 2
    try:
        request = json.loads(sys.stdin.read())
        if not isinstance(request, dict):
            raise WorldError("expected a JSON object on stdin")
        result = answer(World(Path(args[0])), request)
    except (json.JSONDecodeError, WorldError, OSError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, sort_keys=True))
    return 0
