"""Real store faults: a PostgreSQL that goes away, a disk that fills up, a disk that turns read-only.

- `PrivateCluster`: a PostgreSQL cluster of this test session's own (initdb once per session, run as
  the `postgres` OS user, since initdb refuses root), on a random port with its own data directory,
  stopped with `pg_ctl stop -m immediate` (the shared server at 5432 is never touched).
- `DiskFull`: a small tmpfs mounted under the test's directory, filled to the last byte by a file
  (ENOSPC for the store's next write), emptied again to heal.
- `ReadOnlyDisk`: an ext4 image on a loop device, mounted with `errors=remount-ro`; the kernel's own
  `trigger_fs_error` switch makes it read-only mid-run, as a failing disk does. Healing is what an
  administrator does: unmount, `e2fsck`, mount again at the same place.

Mounting needs root, which CI and this machine's tests have.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from tests.gateway.conftest import SHOP_MANIFEST, Shop
from tests.hostile.fuzz import tried

PG_BIN = Path("/usr/lib/postgresql/15/bin")
WAIT_S = 30.0


def _pg_tool(name: str) -> str:
    found = PG_BIN / name
    return str(found) if found.exists() else (shutil.which(name) or name)


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=WAIT_S)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr or done.stdout}")
    return done


class PrivateCluster:
    """A PostgreSQL cluster in a temporary directory owned by `postgres`, on a port of its own."""

    def __init__(self) -> None:
        owner = pwd.getpwnam("postgres")
        self.root = Path(tempfile.mkdtemp(prefix="reversi-pg-"))
        os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.data = self.root / "data"
        self._as_postgres(_pg_tool("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync",
                          "-E", "UTF8")
        self.port = 0
        self.running = False
        self.stops = 0

    def _as_postgres(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _run("runuser", "-u", "postgres", "--", *argv, check=check)

    def start(self) -> None:
        """Start the cluster (on a new random port the first time, the same one after)."""
        if self.running:
            return
        for _ in range(5):
            port = self.port or random.randint(20000, 60000)
            options = f"-p {port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
            done = self._as_postgres(_pg_tool("pg_ctl"), "-D", str(self.data), "-o", options,
                                     "-l", str(self.root / "log"), "-w", "-t", "30", "start", check=False)
            if done.returncode == 0:
                self.port, self.running = port, True
                return
            if self.port:  # the port we had is taken now: a new one for the next databases
                self.port = 0
        raise AssertionError(f"the private PostgreSQL did not start: {(self.root / 'log').read_text()[-2000:]}")

    def stop(self) -> None:
        """`pg_ctl stop -m immediate`: every backend dies at once, as when the machine goes away."""
        self._as_postgres(_pg_tool("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        self.running = False
        self.stops += 1

    def database(self) -> str:
        """The URL of a fresh database in the (started) cluster."""
        self.start()
        name = f"t_{uuid.uuid4().hex}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def close(self) -> None:
        if self.running:
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def private_pg() -> Iterator[PrivateCluster]:
    """The session's private cluster (one initdb per test process)."""
    cluster = PrivateCluster()
    try:
        yield cluster
    finally:
        cluster.close()


class Fault:
    """A store and the fault it can be put through: `inject()` breaks it, `heal()` brings it back."""

    kind = ""
    url = ""
    injected = 0  # how many times `inject` ran, for the published figures

    def inject(self) -> None:
        raise NotImplementedError

    def heal(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Undo everything the fault set up."""


class PostgresGone(Fault):
    kind = "postgres-gone"

    def __init__(self, cluster: PrivateCluster) -> None:
        self.cluster = cluster
        self.url = cluster.database()

    def inject(self) -> None:
        self.cluster.stop()
        self.injected += 1
        tried(f"store-fault:{self.kind}")

    def heal(self) -> None:
        self.cluster.start()

    def close(self) -> None:
        self.cluster.start()  # the next test finds it running


def _mount(*argv: str) -> None:
    _run("mount", *argv)


def _unmount(where: Path) -> None:
    if _run("mountpoint", "-q", str(where), check=False).returncode == 0:
        _run("umount", "-l", str(where))


class DiskFull(Fault):
    """A 16 MiB tmpfs holding the SQLite store; `inject` fills it with a file, `heal` deletes the file."""

    kind = "disk-full"

    def __init__(self, where: Path) -> None:
        self.where = where
        where.mkdir()
        _mount("-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs", str(where))
        self.url = f"sqlite:///{where}/reversi.db"
        self.filler = where / "filler"

    def inject(self) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            block = b"\0" * 65536
            while True:
                try:
                    os.write(fd, block)
                except OSError:  # ENOSPC: fill the last bytes a smaller write at a time
                    if len(block) == 1:
                        break
                    block = block[: len(block) // 2]
        finally:
            os.close(fd)
        self.injected += 1
        tried(f"store-fault:{self.kind}")

    def heal(self) -> None:
        self.filler.unlink(missing_ok=True)

    def close(self) -> None:
        _unmount(self.where)


class ReadOnlyDisk(Fault):
    """An ext4 image holding the SQLite store, made read-only by the kernel's error handling."""

    kind = "read-only"

    def __init__(self, where: Path) -> None:
        self.where = where
        self.image = where.with_suffix(".img")
        with self.image.open("wb") as f:
            f.truncate(32 << 20)
        _run("mkfs.ext4", "-q", "-F", str(self.image))
        where.mkdir()
        self.devices: list[str] = []
        self._mount()
        self.url = f"sqlite:///{where}/reversi.db"

    def _mount(self) -> None:
        """Mount the image through a loop device of its own: `mount -o loop` would reuse the device of
        the aborted file system (still held by the store's open files), and get that back."""
        device = _run("losetup", "--find", "--show", str(self.image)).stdout.strip()
        self.devices.append(device)
        _mount("-o", "errors=remount-ro", device, str(self.where))

    def inject(self) -> None:
        device = Path(self.devices[-1]).name
        Path(f"/sys/fs/ext4/{device}/trigger_fs_error").write_text("reversi store fault test\n")
        options = _run("findmnt", "-no", "OPTIONS", str(self.where)).stdout.strip().split(",")
        assert "ro" in options or "emergency_ro" in options, options
        self.injected += 1
        tried(f"store-fault:{self.kind}")

    def heal(self) -> None:
        """Unmount (lazily: the store's process still has the old files open), repair, mount again."""
        _unmount(self.where)
        done = _run("e2fsck", "-fy", str(self.image), check=False)
        assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: errors found and corrected
        self._mount()

    def close(self) -> None:
        _unmount(self.where)
        for device in self.devices:  # detached once nothing has it open any more
            _run("losetup", "-d", device, check=False)


FAULTS = ("postgres-gone", "disk-full", "read-only")


@dataclass
class Faults:
    """Makes faults of each kind for one test, and undoes them all after it."""

    tmp_path: Path
    cluster: PrivateCluster
    made: list[Fault]

    def make(self, kind: str) -> Fault:
        where = self.tmp_path / f"disk-{len(self.made)}"
        fault: Fault
        if kind == "postgres-gone":
            fault = PostgresGone(self.cluster)
        elif kind == "disk-full":
            fault = DiskFull(where)
        else:
            fault = ReadOnlyDisk(where)
        self.made.append(fault)
        return fault


@pytest.fixture
def faults(tmp_path: Path, private_pg: PrivateCluster) -> Iterator[Faults]:
    made = Faults(tmp_path, private_pg, [])
    try:
        yield made
    finally:
        for fault in made.made:
            with contextlib.suppress(AssertionError):
                fault.close()


@pytest.fixture(params=FAULTS)
def fault(request: pytest.FixtureRequest, faults: Faults) -> Fault:
    """A store of each kind, with its fault."""
    return faults.make(request.param)


MakeFault = Callable[[str], Fault]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def shop(tmp_path: Path) -> Shop:
    """The gateway tests' upstream (`tests/gateway/upstream_server.py`), which logs every call it gets."""
    return Shop("shop", tmp_path / "shop")


@pytest.fixture
def shop_manifest(tmp_path: Path) -> str:
    path = tmp_path / "shop.yaml"
    path.write_text(SHOP_MANIFEST)
    return str(path)
