"""deploy/: the compose file and the systemd units do what docs/deployment.md says. Docker does not run
here, so the compose file is read with PyYAML and the commands it names are started as local
processes (tests/deploy/local.py) against the test's PostgreSQL; so are the units' ExecStart lines."""

from __future__ import annotations

import configparser
import json
import re
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from tests.deploy.local import DEPLOY, LISTENING, ROOT, LocalHost, Process, compose
from tests.gateway.test_http import connect
from tests.server.conftest import WAIT_S, wait_for

POSTGRES_ONLY = pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
REVERSI_SERVICES = ("server-1", "server-2", "gateway")
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"  # a service's PATH by default


@pytest.fixture
def host(db_url: str, tmp_path: Path) -> Iterator[LocalHost]:
    started = LocalHost(tmp_path, db_url)
    yield started
    started.stop()


def admin_key(host: LocalHost) -> str:
    """The key `init` left in the state volume."""
    path = host.volume("reversi-state") / "admin-key.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, "the admin key is readable by its owner only"
    key: str = json.loads(path.read_text())["key"]
    return key


def new_key(server: Process, admin: str, name: str, role: str) -> str:
    answer = httpx.post(f"{server.url}/v1/keys", json={"name": name, "role": role},
                        headers={"Authorization": f"Bearer {admin}"}, timeout=WAIT_S)
    assert answer.status_code == 201, answer.text
    key: str = answer.json()["key"]
    return key


def finished_job(client: httpx.Client, run_id: str) -> dict[str, Any] | None:
    job: dict[str, Any] = client.get(f"/v1/runs/{run_id}/rollback").json()
    return job if job["state"] == "done" else None


def test_the_compose_file_runs_postgres_two_servers_and_a_gateway_each_with_its_health_check() -> None:
    services = compose()["services"]
    programs = sorted(s["command"][0] for s in services.values() if "command" in s)
    assert programs == ["reversi-gateway", "reversi-server", "reversi-server", "sh"]
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["postgres"]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    for name in REVERSI_SERVICES:
        service = services[name]
        assert service["healthcheck"]["test"][0] == "CMD", name
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy", name
        assert service["depends_on"]["init"]["condition"] == "service_completed_successfully", name
        assert re.fullmatch(r"postgresql://reversi:\$\{REVERSI_DB_PASSWORD:\?[^}]+\}@postgres:5432/reversi",
                            service["environment"]["REVERSI_DB"]), name
        assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).resolve().is_file()
    published = [port for name in REVERSI_SERVICES for port in services[name]["ports"]]
    assert all(port.startswith("127.0.0.1:") for port in published), "plain HTTP stays behind the TLS proxy"


@POSTGRES_ONLY
def test_the_compose_services_started_as_local_processes_record_and_roll_back_through_the_connectors(
    host: LocalHost,
) -> None:
    first = host.run("init")
    assert first.returncode == 0, first.stderr
    admin = admin_key(host)
    assert host.run("init").returncode == 0 and admin_key(host) == admin  # a second start makes no new key
    servers = [host.start(name) for name in ("server-1", "server-2")]
    gateway = host.start("gateway")
    for name, process in zip(REVERSI_SERVICES, [*servers, gateway], strict=True):
        check = host.health_check(name, process)
        assert check.returncode == 0, f"{name}: {check.stderr}"
    agent = new_key(servers[0], admin, "agent-1", "agent")
    files = host.volume("reversi-files")

    async def record() -> None:
        async with connect(f"{gateway.url}/mcp", {"Authorization": f"Bearer {agent}",
                                                  "Reversi-Run-Id": "run_compose"}) as client:
            answer = await client.call_tool("fs.write_file", {"path": "a.txt", "content": "hello"})
            assert not answer.is_error, answer

    anyio.run(record)
    assert (files / "a.txt").read_text() == "hello"
    with httpx.Client(base_url=servers[1].url, headers={"Authorization": f"Bearer {admin}"}, timeout=WAIT_S) as ops:
        assert [s["status"] for s in ops.get("/v1/runs/run_compose").json()["steps"]] == ["succeeded"]
        assert ops.post("/v1/runs/run_compose/rollback", json={"confirm": True}).status_code == 202
        job = wait_for(lambda: finished_job(ops, "run_compose"), "the rollback job to finish")
    assert job["report"]["compensated"] == [0] and job["report"]["complete"], job
    assert not (files / "a.txt").exists()


# -- systemd ---------------------------------------------------------------------------------------


def unit(path: Path) -> configparser.RawConfigParser:
    parser = configparser.RawConfigParser(strict=False)
    parser.optionxform = str  # type: ignore[assignment, method-assign]  # keys are case-sensitive
    parser.read(path)
    return parser


def unit_environment(paths: dict[str, str], db_url: str) -> dict[str, str]:
    """deploy/systemd/reversi.env as the units read it, over the little systemd gives a service, with this
    machine's paths and the test's store."""
    env = {"PATH": SYSTEMD_PATH, "LANG": "C.UTF-8"}
    for line in (DEPLOY / "systemd" / "reversi.env").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            if len(value) >= 2 and value[0] == value[-1] == '"':  # systemd drops the quotes, as a shell does
                value = value[1:-1]
            env[key] = local_paths(value, paths)
    env["REVERSI_DB"] = db_url
    return env


def local_paths(text: str, paths: dict[str, str]) -> str:
    for target, directory in paths.items():
        text = text.replace(target, directory)
    return text


@POSTGRES_ONLY
@pytest.mark.parametrize("name", ["reversi-server@.service", "reversi-gateway.service"])
def test_each_systemd_unit_starts_its_command_and_stops_cleanly_on_sigterm(
    db_url: str, tmp_path: Path, name: str
) -> None:
    service = unit(DEPLOY / "systemd" / name)["Service"]
    assert service["EnvironmentFile"] == "/etc/reversi/reversi.env" and service["KillSignal"] == "SIGTERM"
    for directory in ("state", "files"):
        (tmp_path / directory).mkdir()
    paths = {"/opt/reversi/bin": str(Path(sys.executable).parent), "/etc/reversi": str(DEPLOY / "config"),
             "/var/lib/reversi": str(tmp_path / "state"), "/srv/files": str(tmp_path / "files")}
    argv = local_paths(service["ExecStart"].replace("%i", "0"), paths).split()
    argv = [re.sub(r"^127\.0\.0\.1:\d+$", "127.0.0.1:0", arg) for arg in argv]
    assert Path(argv[0]).parent == Path(sys.executable).parent, "ExecStart runs one of the package's commands"
    proc = subprocess.Popen(argv, env=unit_environment(paths, db_url), cwd=tmp_path, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, text=True)
    process = Process(name, proc, tmp_path / "unit.log")
    try:
        url = process.search(LISTENING.pattern).group(1)
        assert httpx.get(f"{url}/healthz", timeout=WAIT_S).status_code == 200
        proc.send_signal(signal.SIGTERM)
        # After a graceful shutdown the server exits 0; the gateway (uvicorn) ends by the signal it
        # caught, which systemd counts as a clean stop as well.
        assert proc.wait(float(service["TimeoutStopSec"])) in (0, -signal.SIGTERM)
    finally:
        process.signal(signal.SIGKILL)


def test_the_dockerfile_installs_the_package_and_leaves_the_working_tree_out() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    # the lock file's versions, which CI tested, not the newest the ranges allow
    installs = r"^RUN pip install --no-cache-dir -c /src/reversi/requirements-lock.txt /src/reversi"
    assert re.search(installs, dockerfile, re.M)
    assert re.search(r"^USER reversi$", dockerfile, re.M)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", "node_modules", ".git"} <= set(ignored)


def test_the_environment_file_reads_the_same_in_a_shell_as_in_systemd() -> None:
    """docs/deployment.md makes the first key with `set -a; . reversi.env`: the file must be a shell's too."""
    path = DEPLOY / "systemd" / "reversi.env"
    shown = subprocess.run(["sh", "-c", f'set -a; . "{path}"; exec env'], capture_output=True, text=True,
                           check=True, env={}).stdout
    in_shell = dict(line.split("=", 1) for line in shown.splitlines() if line.startswith(("REVERSI_", "PATH=")))
    assert in_shell == {key: value for key, value in unit_environment({}, "").items() if key != "LANG"} | {
        "REVERSI_DB": in_shell["REVERSI_DB"]}
    assert in_shell["REVERSI_COMPENSATOR_CMD"] == "/opt/reversi/bin/reversi-connectors compensate"


def test_the_deployments_manifest_is_the_fs_connectors_own() -> None:
    """deploy/config/fs.yaml is `reversi-connectors manifest fs` as shipped: a copy that drifts would
    leave the gateway's tools without the entries the connector has."""
    shipped = subprocess.run([str(Path(sys.executable).parent / "reversi-connectors"), "manifest", "fs"],
                             capture_output=True, text=True, check=True).stdout
    assert (DEPLOY / "config" / "fs.yaml").read_text() == shipped
