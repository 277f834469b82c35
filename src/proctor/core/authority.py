"""Authority: what a run may do, and how a method or a step narrows it (pure).

An :class:`Authority` holds ``effects`` (``none`` < ``ask`` < ``allow``), ``reach``
(``workspace`` < ``inputs``), limits and standing approvals. What applies to a step is the
narrowest of its host's, its method's and its own: :func:`narrow` never widens, so a value
wider than the host's narrows nothing.

A host states it as JSON (``--run-authority``)::

    {"effects": "ask", "reach": "workspace", "max_calls": 50,
     "standing_approvals": [{"edits": {"paths": ["notes"]}},
                            {"commands": {"argv_prefix": ["git", "status"]}},
                            {"local": true}]}

With no host, a run takes ``effects: allow, reach: workspace`` and records that no host set
them; a path input reaches another folder only when a host grants ``reach: inputs``. Runs that
an MCP client or a managed agent drives take ``effects: ask, reach: workspace`` instead
(:func:`default_authority`), and a host document they are given fills what it leaves unstated
from that default.

``packages`` (a list of patterns, absent for no limit) names the packages a run's tree may run:
every run of the tree, the root and each child, must have a package identity one pattern covers
(:mod:`proctor.core.packages`), or it is refused before its first step; an empty list covers
nothing.

A run's recorded authority also carries ``egress``: the workspace's allow-list of destinations
(``proctor.toml`` ``[egress] allow``), read once when the run is created so that the receipt's
authority digest covers it. It belongs to the workspace, not the host: a host's document that
states ``egress`` is refused, and only a run record is read with it (``recorded=True``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from proctor.contracts.values import dataclass, field, replace
from proctor.core.budget import MAX_RUN_RECEIPTS
from proctor.core.packages import package_covered, parse_packages
from proctor.errors import UsageError

__all__ = [
    "EFFECTS_ORDER",
    "LIMIT_NAMES",
    "REACH_ORDER",
    "Authority",
    "Effects",
    "EgressGrant",
    "Reach",
    "StandingApproval",
    "default_authority",
    "narrow",
    "package_covered",
    "parse_authority",
    "parse_standing",
]

Effects = Literal["none", "ask", "allow"]
Reach = Literal["workspace", "inputs"]
EFFECTS_ORDER: tuple[str, ...] = ("none", "ask", "allow")
REACH_ORDER: tuple[str, ...] = ("workspace", "inputs")
LIMIT_NAMES: tuple[str, ...] = ("max_calls", "max_concurrency", "max_child_depth", "max_fanout")
_LIMIT_CEILING = 1_000_000
_OPERATION_NAME = re.compile(
    r"^[a-z][a-z0-9_-]{0,63}/(\*|[a-z][a-z0-9_.-]{0,255})$"
    # an upstream MCP tool: mcp:<server>/<tool> or every tool of a server, mcp:<server>/*
    r"|^mcp:[A-Za-z0-9][A-Za-z0-9_-]{0,62}/(\*|[A-Za-z0-9_.-]{1,128})$"
)


@dataclass(frozen=True)
class StandingApproval:
    """A person's bounded confirmation, exactly one kind.

    Attributes:
        kind: ``edits`` (file changes under ``paths``, by whole components; ``""`` is the
            whole workspace, ``$NAME`` a root a run's input names), ``commands`` (argv
            beginning with ``argv_prefix``'s exact tokens) or ``local`` (every local effect
            the floor holds) or ``operations`` (connector operations named ``c/op``, or every
            operation of ``c`` for ``c/*``; never one declared ``approval: required``).
    """

    kind: Literal["edits", "commands", "local", "operations"]
    paths: tuple[str, ...] = ()
    argv_prefix: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The entry as the host wrote it."""
        if self.kind == "edits":
            return {"edits": {"paths": list(self.paths)}}
        if self.kind == "commands":
            return {"commands": {"argv_prefix": list(self.argv_prefix)}}
        if self.kind == "operations":
            return {"operations": {"names": list(self.names)}}
        return {"local": True}

    def covers_operation(self, operation: str) -> bool:
        """True when ``operation`` (``connector/op``) is named, or its connector's ``c/*`` is."""
        if self.kind != "operations":
            return False
        connector = operation.split("/", 1)[0]
        return operation in self.names or f"{connector}/*" in self.names

    def covers_paths(self, paths: Sequence[str]) -> bool:
        """True when every workspace-relative path lies under one of ``paths``."""
        if self.kind == "local":
            return True
        if self.kind != "edits" or not paths:
            return False
        return all(any(_under(p, root) for root in self.paths) for p in paths)

    def covers_argv(self, argv: Sequence[str]) -> bool:
        """True when ``argv`` begins with the exact prefix (``local`` covers every command)."""
        if self.kind == "local":
            return True
        if self.kind != "commands" or not self.argv_prefix:
            return False
        return tuple(argv[: len(self.argv_prefix)]) == self.argv_prefix


def _under(path: str, root: str) -> bool:
    root = root.strip("/")
    if root in ("", "."):
        return not path.startswith("$")  # the whole workspace; another root is named as $NAME
    parts, prefix = path.strip("/").split("/"), root.split("/")
    return parts[: len(prefix)] == prefix


@dataclass(frozen=True)
class EgressGrant:
    """The destinations a run may reach beyond the public internet, as the run recorded them.

    The entries are kept as text (host names and CIDR networks, already normalized by the
    runtime's egress module, which parses and enforces them); this layer only carries them.
    """

    hosts: tuple[str, ...] = ()
    networks: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        """The grant as a run records it: ``{"hosts": [...], "networks": [...]}``."""
        return {"hosts": list(self.hosts), "networks": list(self.networks)}


@dataclass(frozen=True)
class Authority:
    """What a run (or one of its steps) may do.

    Attributes:
        effects: ``none`` refuses every change, ``ask`` pauses each change with no approval
            of its own, ``allow`` admits changes that pass every other check.
        reach: ``workspace`` keeps file tools inside the workspace; ``inputs`` also reaches
            roots the run's inputs name.
        max_calls / max_concurrency / max_child_depth / max_fanout: ``None`` is no limit.
        max_spend_micro_usd: what the run's whole tree may spend on priced calls, in
            micro-dollars (``None``: no limit; see :mod:`proctor.core.spend`).
        max_receipts: how many receipts (runs, steps, calls) the run's whole tree may hold
            (``None``: the host's ceiling, see :mod:`proctor.core.budget`); a run whose fixed
            steps need more is refused before its first step.
        standing_approvals: entries that admit covered changes without pausing.
        set_by: ``host`` when a host stated it, ``default`` when none did.
        egress: the workspace's egress grant once the run recorded it; ``None`` before.
        packages: the package patterns every run of the tree must be covered by
            (:func:`package_covered`); ``None`` is no limit, ``()`` covers nothing.
        min_approvers: distinct people every approval of the run needs (``None``: one).
        expires_in: seconds a request waits before its default decides it (``None``: the
            step's, else the workspace's, else no deadline).
        deadline: when the whole run stops (ISO 8601 with a UTC offset): a step is never
            started past it, and a run paused past it is stopped ``failed``.
    """

    effects: Effects = "allow"
    max_calls: int | None = None
    reach: Reach = "workspace"
    max_concurrency: int | None = None
    max_child_depth: int | None = None
    max_fanout: int | None = None
    standing_approvals: tuple[StandingApproval, ...] = field(default=())
    set_by: Literal["host", "default", "preset"] = "default"
    egress: EgressGrant | None = None
    max_spend_micro_usd: int | None = None
    packages: tuple[str, ...] | None = None
    min_approvers: int | None = None
    expires_in: int | None = None
    deadline: str | None = None
    max_receipts: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The authority as recorded in the run store and digested into receipts."""
        doc: dict[str, Any] = {
            "effects": self.effects,
            "reach": self.reach,
            "max_calls": self.max_calls,
            "max_concurrency": self.max_concurrency,
            "max_child_depth": self.max_child_depth,
            "max_fanout": self.max_fanout,
            "standing_approvals": [s.to_json() for s in self.standing_approvals],
            "set_by": self.set_by,
        }
        if self.egress is not None:
            doc["egress"] = self.egress.to_json()
        if self.max_spend_micro_usd is not None:  # stated only when set (older digests hold)
            doc["max_spend_micro_usd"] = self.max_spend_micro_usd
        if self.packages is not None:  # stated only when set (older digests hold)
            doc["packages"] = list(self.packages)
        for name in ("min_approvers", "expires_in", "deadline"):  # also only when set
            if getattr(self, name) is not None:
                doc[name] = getattr(self, name)
        if self.max_receipts is not None:  # likewise
            doc["max_receipts"] = self.max_receipts
        return doc

    def deadline_at(self) -> datetime | None:
        """:attr:`deadline` as an aware datetime (``None`` when unset)."""
        return None if self.deadline is None else datetime.fromisoformat(self.deadline)


def default_authority(*, managed: bool) -> Authority:
    """What a run takes when no host states an authority (recorded as ``set_by: default``).

    ``managed`` (an MCP client or a managed agent proposes the calls): ``effects: ask``, so
    every change waits for a person; otherwise ``effects: allow``. Reach is ``workspace``
    either way.
    """
    made = _DEFAULTS.get(managed)
    if made is None:  # one value per kind, shared: an Authority is frozen, its fields too
        made = _DEFAULTS[managed] = Authority(effects="ask") if managed else Authority()
    return made


_DEFAULTS: dict[bool, Authority] = {}


def _narrower(order: tuple[str, ...], a: str, b: str | None) -> str:
    if b is None:
        return a
    return a if order.index(a) <= order.index(b) else b


def _min_limit(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def narrow(
    host: Authority,
    *,
    effects: str | None = None,
    reach: str | None = None,
    limits: Mapping[str, int | None] | None = None,
) -> Authority:
    """The narrowest of ``host`` and what a method or step states; never wider than ``host``.

    Standing approvals, the egress grant and the package patterns are the host's run's (a
    package cannot grant itself any of them).
    """
    values: dict[str, Any] = {
        "effects": _narrower(EFFECTS_ORDER, host.effects, effects),
        "reach": _narrower(REACH_ORDER, host.reach, reach),
    }
    for name in LIMIT_NAMES:
        values[name] = _min_limit(getattr(host, name), (limits or {}).get(name))
    spend = (limits or {}).get("max_spend_micro_usd")
    values["max_spend_micro_usd"] = _min_limit(host.max_spend_micro_usd, spend)
    values["max_receipts"] = _min_limit(host.max_receipts, (limits or {}).get("max_receipts"))
    return replace(host, **values)


def parse_standing(
    entries: Any, *, where: str = "standing_approvals"
) -> tuple[StandingApproval, ...]:
    """Read a list of standing approvals, each one of ``edits``, ``commands``, ``local``,
    ``operations``.

    Raises:
        UsageError: ``authority_invalid`` naming the entry that is malformed.
    """
    if not isinstance(entries, list):
        raise UsageError(f"{where} must be a list", code="authority_invalid")
    out: list[StandingApproval] = []
    for index, entry in enumerate(entries):
        at = f"{where}[{index}]"
        if not isinstance(entry, dict) or len(entry) != 1:
            raise UsageError(
                f"{at} must hold exactly one of edits, commands, local, operations",
                code="authority_invalid",
            )
        ((kind, body),) = entry.items()
        if kind == "local":
            if body is not True:
                raise UsageError(f"{at}: local takes true", code="authority_invalid")
            out.append(StandingApproval("local"))
        elif kind == "edits":
            paths = body.get("paths") if isinstance(body, dict) and len(body) == 1 else None
            if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                raise UsageError(f"{at}: edits takes {{paths: [..]}}", code="authority_invalid")
            if any(p.startswith("/") or ".." in p.split("/") for p in paths):
                raise UsageError(
                    f"{at}: edit paths are workspace-relative, without '..'",
                    code="authority_invalid",
                )
            out.append(StandingApproval("edits", paths=tuple(paths)))
        elif kind == "commands":
            prefix = body.get("argv_prefix") if isinstance(body, dict) and len(body) == 1 else None
            if (
                not isinstance(prefix, list)
                or not prefix
                or not all(isinstance(t, str) and t for t in prefix)
            ):
                raise UsageError(
                    f"{at}: commands takes {{argv_prefix: [..]}} with at least one token",
                    code="authority_invalid",
                )
            out.append(StandingApproval("commands", argv_prefix=tuple(prefix)))
        elif kind == "operations":
            names = body.get("names") if isinstance(body, dict) and len(body) == 1 else None
            if (
                not isinstance(names, list)
                or not names
                or not all(isinstance(n, str) and _OPERATION_NAME.match(n) for n in names)
            ):
                raise UsageError(
                    f"{at}: operations takes {{names: [connector/op or connector/*, ..]}}",
                    code="authority_invalid",
                )
            out.append(StandingApproval("operations", names=tuple(names)))
        else:
            raise UsageError(f"{at}: unknown kind {kind!r}", code="authority_invalid")
    return tuple(out)


_KEYS = frozenset(
    {
        "effects",
        "reach",
        "standing_approvals",
        "set_by",
        "max_spend_micro_usd",
        "packages",
        "max_receipts",
        *LIMIT_NAMES,
    }
    | {"min_approvers", "expires_in", "deadline"}
)
MAX_APPROVERS = 10
MAX_EXPIRES_IN = 30 * 86400


def _parse_deadline(value: Any) -> str | None:
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is None or len(value) > 64:
        raise UsageError(
            "deadline is an ISO 8601 time with a UTC offset (2026-01-31T18:00:00+00:00)",
            code="authority_invalid",
        )
    return str(value)


def _parse_people(doc: Mapping[str, Any]) -> tuple[int | None, int | None]:
    approvers, expires = doc.get("min_approvers"), doc.get("expires_in")
    if approvers is not None and (
        type(approvers) is not int or not 1 <= approvers <= MAX_APPROVERS
    ):
        raise UsageError(
            f"min_approvers must be an integer from 1 to {MAX_APPROVERS}", code="authority_invalid"
        )
    if expires is not None and (type(expires) is not int or not 1 <= expires <= MAX_EXPIRES_IN):
        raise UsageError(
            f"expires_in must be whole seconds from 1 to {MAX_EXPIRES_IN}",
            code="authority_invalid",
        )
    return approvers, expires


def _parse_egress(value: Any) -> EgressGrant:
    lists = (
        [value.get("hosts", []), value.get("networks", [])]
        if isinstance(value, dict) and set(value) <= {"hosts", "networks"}
        else None
    )
    if lists is None or not all(
        isinstance(entries, list) and all(isinstance(e, str) and e for e in entries)
        for entries in lists
    ):
        raise UsageError(
            "egress is {hosts: [..], networks: [..]} of non-empty strings",
            code="authority_invalid",
        )
    return EgressGrant(hosts=tuple(lists[0]), networks=tuple(lists[1]))


def parse_authority(
    doc: Any,
    *,
    set_by: Literal["host", "preset"] = "host",
    recorded: bool = False,
    base: Authority | None = None,
) -> Authority:
    """Read a host's authority document (or, with ``recorded``, a run's recorded authority).

    Unstated ``effects`` and ``reach`` take ``base``'s (default: ``effects: allow, reach:
    workspace``; pass :func:`default_authority` ``(managed=True)`` for an MCP or managed-agent
    surface); unstated limits are unlimited.

    Raises:
        UsageError: ``authority_invalid`` for an unknown key, an unknown effects or reach, a
            limit that is not a positive integer (``max_receipts``: at most 16,000,000), a
            malformed standing approval, a malformed recorded ``egress``, ``egress`` in a
            host's document (it belongs to the workspace's ``proctor.toml``), or ``packages``
            that is not a list of patterns.
    """
    if not isinstance(doc, dict):
        raise UsageError("an authority is one JSON object", code="authority_invalid")
    if "egress" in doc and not recorded:
        raise UsageError(
            "egress is not a host's to grant: a workspace allows destinations in proctor.toml "
            "[egress] allow",
            code="authority_invalid",
        )
    unknown = sorted(set(doc) - _KEYS - {"egress"})
    if unknown:
        raise UsageError(
            f"unknown authority field(s): {', '.join(unknown)}", code="authority_invalid"
        )
    defaults = base or Authority()
    effects = doc.get("effects", defaults.effects)
    if effects not in EFFECTS_ORDER:
        raise UsageError("effects is one of none, ask, allow", code="authority_invalid")
    reach = doc.get("reach", defaults.reach)
    if reach not in REACH_ORDER:
        raise UsageError("reach is one of workspace, inputs", code="authority_invalid")
    limits: dict[str, int | None] = {}
    for name in LIMIT_NAMES:
        value = doc.get(name)
        if value is not None and (type(value) is not int or not 1 <= value <= _LIMIT_CEILING):
            raise UsageError(
                f"{name} must be an integer from 1 to {_LIMIT_CEILING}", code="authority_invalid"
            )
        limits[name] = value
    spend = doc.get("max_spend_micro_usd")
    if spend is not None and (type(spend) is not int or not 0 <= spend <= 2**53 - 1):
        raise UsageError(
            "max_spend_micro_usd must be a whole number of micro-dollars from 0 to 2^53-1",
            code="authority_invalid",
        )
    receipts = doc.get("max_receipts")
    if receipts is not None and (
        type(receipts) is not int or not 1 <= receipts <= MAX_RUN_RECEIPTS
    ):
        raise UsageError(
            f"max_receipts must be an integer from 1 to {MAX_RUN_RECEIPTS}",
            code="authority_invalid",
        )
    standing = parse_standing(doc.get("standing_approvals", []))
    min_approvers, expires_in = _parse_people(doc)
    deadline = _parse_deadline(doc.get("deadline"))
    stated_by = doc.get("set_by", set_by)
    if stated_by not in ("host", "default", "preset"):
        raise UsageError("set_by is one of host, default, preset", code="authority_invalid")
    return Authority(
        effects=effects,
        reach=reach,
        standing_approvals=standing,
        set_by=stated_by,
        egress=_parse_egress(doc["egress"]) if "egress" in doc else None,
        max_spend_micro_usd=spend,
        packages=parse_packages(doc["packages"]) if "packages" in doc else None,
        min_approvers=min_approvers,
        expires_in=expires_in,
        deadline=deadline,
        max_receipts=receipts,
        **limits,
    )
