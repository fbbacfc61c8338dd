"""The operator's checks that its upstreams are the ones the agent's calls went to.

Compensations act on whatever the upstream process reaches (its working directory, environment,
data and credentials), so the operator must start each upstream exactly as the agent's gateway did.
That cannot be checked fully from here; what can, cheaply, is that an upstream offers at least one of
the compensation tools the manifests name for its tools (at start: one that offers none is most
likely another server, or the same one started with other credentials or settings), and, for a
run, that each upstream its calls went through (the gateway journals each call's upstream: its
name, and its command and working directory or its URL) is one the operator has, started alike.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from reversi.core.json_values import JSONObjectView, LooseJSON
from reversi.core.manifest import ManifestSet
from reversi.core.models import Event
from reversi.core.tool_listing import parse_listing
from reversi.engine.manifest_files import check_manifest_fit
from reversi.gateway.upstream import Upstream, UpstreamPool

log = logging.getLogger("reversi.gateway")


def compensations_named(pool: UpstreamPool, manifests: ManifestSet, upstream: Upstream) -> list[str]:
    """The compensation tools (as the manifests name them) that the manifests name for the tools
    `upstream` serves and that `upstream` would be asked to run."""
    names = {pool.public_name(upstream, tool.name) for tool in upstream.tools}
    names.update(entry.pattern for entry in manifests.entries)
    named: set[str] = set()
    for name in names:
        route, entry = pool.route(name), manifests.lookup(name)
        if route is None or route.upstream is not upstream or entry is None:
            continue
        for tool in (call.tool for comp in entry.compensations for call in comp.calls):
            compensation = pool.route(tool)
            if compensation is not None and compensation.upstream is upstream:
                named.add(tool)
    return sorted(named)


def warn_of_missing_compensations(pool: UpstreamPool, manifests: ManifestSet) -> None:
    """Say on stderr, one line each, which started upstreams offer none of the compensations named
    for their tools."""
    for upstream in pool.upstreams:
        if not upstream.has_connected:
            continue  # said already: it could not start
        named = compensations_named(pool, manifests, upstream)
        offered = {pool.public_name(upstream, tool.name) for tool in upstream.tools}
        if named and offered.isdisjoint(named):
            log.warning(
                "upstream %s offers none of the compensation tools the manifests name for its tools (%s): start "
                "the operator with the upstream command, working directory and environment the agent's gateway used",
                upstream.name, ", ".join(named),
            )


def warn_of_misfits(pool: UpstreamPool, manifests: Sequence[str], in_force: ManifestSet) -> None:
    """Say on stderr, one line per problem, how the manifest files in force (`in_force`, read from
    `manifests`) do not fit the started upstreams' tools (the checks of `reversi manifest check
    --upstream`), and once if they name tools without the upstream's prefix. The gateway starts anyway."""
    if not manifests:
        return
    _warn_of_unprefixed(pool, in_force)
    tools = [tool for tool in pool.listed_tools() if _started(pool, str(tool.get("name")))]
    listing = parse_listing({"tools": tools}, "the upstreams' tools")

    def judged(name: str) -> bool:
        return _started(pool, name)

    for problem in check_manifest_fit(manifests, listing, judged, fit_only=True):
        log.warning("the manifest does not fit the upstream's tools: %s", problem)


def _warn_of_unprefixed(pool: UpstreamPool, manifests: ManifestSet) -> None:
    if not pool.prefixed:
        return
    served = {tool.name: upstream for upstream in pool.upstreams for tool in upstream.tools}
    bare = [(entry.pattern, served[entry.pattern]) for entry in manifests.entries
            if pool.route(entry.pattern) is None and entry.pattern in served]
    if bare:
        name, upstream = bare[0]
        log.warning(
            "the manifests name %d tool(s) without their upstream's prefix (%s is served as %s): with several "
            "upstreams each tool is UPSTREAM.TOOL; `reversi manifest show NAME --prefix UPSTREAM` prints a shipped "
            "manifest so", len(bare), name, pool.public_name(upstream, name),
        )


def _started(pool: UpstreamPool, name: str) -> bool:
    route = pool.route(name)
    return route is not None and route.upstream.has_connected


def _described(identity: JSONObjectView) -> str:
    if "url" in identity:
        return str(identity["url"])
    return f"{identity.get('command')} in {identity.get('cwd')}"


def upstream_differences(pool: UpstreamPool, events: Iterable[Event]) -> list[str]:
    """One line per upstream that the run's calls went through and this operator does not have, or
    has started otherwise (another command, working directory or URL). Calls journaled without
    their upstream (by an older gateway, or not through one) are not checked."""
    mine = {upstream.name: upstream.identity for upstream in pool.upstreams}
    seen: dict[str, tuple[int, Mapping[str, LooseJSON]]] = {}
    for event in events:
        via = event.data.get("upstream") if event.type == "intended" else None
        if isinstance(via, Mapping) and isinstance(via.get("name"), str) and event.step is not None:
            seen.setdefault(via["name"], (event.step, via))
    lines = []
    for name, (step, theirs) in sorted(seen.items()):
        ours = mine.get(name)
        if ours == dict(theirs):
            continue
        now = f"this operator's {name} is {_described(ours)}" if ours else f"this operator has no upstream {name}"
        lines.append(f"step {step} and later calls went through upstream {name} ({_described(theirs)}); {now}: "
                     "its compensations may act on other data")
    return lines
