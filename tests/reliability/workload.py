"""What a seed decides: the target and back end, the calls an agent makes, and where the kills fall.

Everything random in a campaign run comes from `random.Random(seed)` here, so `make soak SEED=N` makes
the same calls and arms the same kills (the moment a kill lands still depends on the machine's timing).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

TARGETS = ("sdk", "cli", "server", "gateway")
BACKENDS = ("sqlite", "postgres")


@dataclass(frozen=True)
class Call:
    """One forward call; `timeout`: the caller gives up after the effect (the SDK raises TimeoutError,
    an HTTP agent reports `uncertain`, the gateway's call timeout passes)."""

    tool: str
    args: dict[str, Any]
    depends_on: tuple[int, ...] = ()
    timeout: bool = False


@dataclass(frozen=True)
class Kill:
    """SIGKILL the process under test `delay_ms` after the witness's `after`-th call from when it is
    armed (after 0: `delay_ms` after arming). `recovery`: it falls on the first recovery, not the run."""

    after: int
    delay_ms: float
    recovery: bool = False


@dataclass(frozen=True)
class Workload:
    seed: int
    target: str
    backend: str
    calls: tuple[Call, ...]
    kills: tuple[Kill, ...]
    resolve_first: bool = False  # settle unresolved steps before the first rollback (cli)
    retries: int = 1
    agents: int = 1  # server, gateway: callers recording at once (their journal writes share commits)
    verify: bool = False  # cli: --verify-cmd checks each undo too

    @property
    def run_id(self) -> str:
        return f"run_s{self.seed}"


def cell(seed: int) -> tuple[str, str]:
    """The target and back end a seed runs on: the two cycle together, so every 8 seeds cover all."""
    return TARGETS[seed % len(TARGETS)], BACKENDS[(seed // len(TARGETS)) % len(BACKENDS)]


# The undo failures a target's retries can absorb without slowing CI: the gateway and the server back
# off 250 ms between attempts, the CLI and the SDK 1 ms.
_UNDO_FAILS = {"sdk": (0, 0, 1, 2), "cli": (0, 0, 1, 2), "server": (0, 0, 0, 1), "gateway": (0, 0, 0, 0, 1)}


def _calls(rng: random.Random, seed: int, target: str) -> list[Call]:
    calls: list[Call] = []
    created: list[int] = []
    for i in range(rng.randint(2, 4)):
        tool = rng.choices(("w_create", "w_charge", "w_attach", "w_guarded", "w_notify", "w_lookup"),
                           (5, 4, 3, 2, 1, 1))[0]
        if tool == "w_attach" and not created:
            tool = "w_create"
        args: dict[str, Any] = {"op": f"s{seed}-{i}"}
        if tool != "w_lookup":
            args["undo_fails"] = rng.choice(_UNDO_FAILS[target])
            if rng.random() < 0.12:
                args["fail"] = True
        if tool == "w_create":
            args["read_lag"] = rng.choice((0, 0, 1, 2))
        depends: tuple[int, ...] = ()
        if calls and tool != "w_notify" and rng.random() < 0.2:  # an irreversible dependent would
            # leave what it depends on deferred for ever: right, and nothing an operator could settle
            depends = (rng.randrange(len(calls)),)
        timeout = tool != "w_lookup" and rng.random() < (0.05 if target == "gateway" else 0.12)
        if timeout:
            args["timeout"] = True  # the caller gives up after the effect; through the gateway, the
            # witness answers after the gateway's call timeout (and applies the effect then, if it still can)
        if tool == "w_create":
            created.append(i)
        calls.append(Call(tool, args, depends, timeout))
    return calls


def _undo_events(calls: list[Call]) -> int:
    """About how many calls the witness sees in a rollback of these calls (not counting failures)."""
    undone = [c for c in calls if c.tool not in ("w_notify", "w_lookup") and not c.args.get("fail")]
    return len(undone) + sum(1 for c in undone if c.tool == "w_create")


def _kill(rng: random.Random, events: int) -> tuple[int, float]:
    after = rng.randint(0, max(events, 1))
    if after == 0:
        return 0, rng.uniform(0, 300)  # from the moment it is armed: start-up, opening the store
    return after, 0.0 if rng.random() < 0.3 else rng.uniform(0, 20)


def workload(seed: int) -> Workload:
    """The seed's workload."""
    rng = random.Random(seed)
    target, backend = cell(seed)
    calls = _calls(rng, seed, target)
    undo = _undo_events(calls)
    if target == "sdk":  # the recording process; the operator's rollback after it runs in-process
        events = len(calls)
    elif target == "cli":  # the rollback process; the run is recorded before it
        events = undo
    else:  # the server and the gateway record and roll back in one process
        events = len(calls) + undo
    kills = [Kill(*_kill(rng, events))]
    if target != "sdk" and rng.random() < 0.2:
        kills.append(Kill(*_kill(rng, undo), recovery=True))
    return Workload(seed, target, backend, tuple(calls), tuple(kills),
                    resolve_first=rng.random() < 0.5, retries=rng.choice((1, 2, 3, 3)),
                    agents=rng.choice((1, 2)) if target in ("server", "gateway") else 1,
                    verify=target == "cli" and rng.random() < 0.3)


def shares(w: Workload) -> list[list[int]]:
    """The calls each agent makes, in its order: call i goes to agent i mod `agents`."""
    return [list(range(agent, len(w.calls), w.agents)) for agent in range(w.agents)]
