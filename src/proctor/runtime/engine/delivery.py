"""Credentials and egress for one run: resolved once, delivered only at the adapter boundary.

The driver calls three things here:

- :func:`load_run_egress` when a run is created: the workspace's ``[egress] allow`` list,
  which :func:`record_authority` puts into the run's authority record as its
  :class:`~proctor.core.authority.EgressGrant` (and so into the authority digest of its
  receipt);
- :func:`prepare_delivery` while the run is prepared, before any step runs: it resolves the
  credentials the method's steps name from one workspace snapshot, adds every value to the
  run's taint set, records the non-secret choice (profile names, never material) in the run
  store, and returns the admission ``deliver`` seam: ``http.request`` gets its step's
  credential in a :class:`~proctor.runtime.tools.http.NetworkContext` (sent as the
  ``Authorization`` header), ``command.execute`` in a
  :class:`~proctor.runtime.tools.command.ProcessContext` (set in the child's environment under
  the declared delivery name);
- :func:`park_needs_credential` when a credential is missing: the run stays unsealed with
  status ``needs_credential`` and the exact setup commands. No step ran, so there is nothing
  for a receipt to attest; the operator sets the credential up and runs the command again,
  which starts a new run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proctor.contracts.envelope import Refusal, RunEnvelope
from proctor.contracts.skill import Method, ProcessStep, ToolStep
from proctor.contracts.values import replace
from proctor.core.authority import EgressGrant
from proctor.errors import CredentialError
from proctor.runtime.boundary.egress_allow import EgressAllow, load_egress_allow
from proctor.runtime.tools.base import OPERATION_PREFIX

if TYPE_CHECKING:
    from proctor.core.authority import Authority
    from proctor.runtime.admission.governor import Deliver
    from proctor.runtime.boundary.egress import EgressRoute
    from proctor.runtime.boundary.sanitize import Sanitizer, TaintSet
    from proctor.runtime.home.credentials import CredentialStore
    from proctor.runtime.records.audit import AuditLog
    from proctor.runtime.records.runs import RunStore
    from proctor.runtime.skills import LoadedSkill
    from proctor.runtime.tools.base import Tool

__all__ = [
    "NeedsCredential",
    "load_run_egress",
    "park_needs_credential",
    "prepare_delivery",
    "record_authority",
    "recorded_egress",
    "step_credentials",
    "with_aliases",
]


class NeedsCredential(CredentialError):
    """A credential the run needs is not configured (code ``needs_credential``).

    Attributes:
        readiness: ``Readiness.to_dict()`` of each missing requirement (no material); also
            in ``details["readiness"]``.
    """

    def __init__(self, message: str, readiness: list[dict[str, Any]]) -> None:
        super().__init__(message, code="needs_credential", details={"readiness": readiness})
        self.readiness = readiness


def record_authority(authority: Authority, egress: EgressAllow) -> dict[str, Any]:
    """The authority record of a new run: the host's authority with the workspace's grant."""
    global _RECORDED
    doc = egress.to_authority()
    entries = (tuple(doc["hosts"]), tuple(doc["networks"]))
    kept = _RECORDED
    if kept is not None and kept[0] is authority and kept[1] == entries:
        return kept[2].to_json()  # a new document each time (the caller's to change)
    recorded = replace(authority, egress=EgressGrant(hosts=entries[0], networks=entries[1]))
    _RECORDED = (authority, entries, recorded)
    return recorded.to_json()


# record_authority's last answer: the authority it was given (the very value: an Authority is
# frozen, its fields too, so the same value with the same entries makes the same record), the
# grant's entries and the authority with the grant; a session's runs mostly repeat the two
_RECORDED: tuple[Authority, tuple[tuple[str, ...], tuple[str, ...]], Authority] | None = None


def recorded_egress(grant: EgressGrant | None) -> EgressAllow:
    """The egress allow-list of the grant a run recorded in its authority (empty when none
    was recorded; the driver parsed the record, refusing an altered one, before delivery).

    Raises:
        ConfigError: the recorded entries are not valid (the record was altered).
    """
    if grant is None:
        return EgressAllow()
    return EgressAllow.parse([*grant.hosts, *grant.networks])


def load_run_egress(workspace_root: Path) -> EgressAllow:
    """The workspace's egress allow-list, read once per run.

    Raises:
        ConfigError: ``proctor.toml`` is invalid or an entry is refused.
    """
    return load_egress_allow(workspace_root)


def step_credentials(method: Method) -> dict[str, str | None]:
    """Step id -> the credential it names, for the method's tool and process-tool steps that
    name one."""
    return {
        step.id: step.credential
        for step in method.steps
        if isinstance(step, ToolStep | ProcessStep) and step.credential is not None
    }


def prepare_delivery(
    skill: LoadedSkill,
    method: Method,
    *,
    run_id: str,
    store: RunStore,
    workspace_root: Path,
    environ: Mapping[str, str],
    egress: EgressGrant | None,
    taint: TaintSet,
    profile: str | None = None,
    request_secrets: Mapping[str, str] | None = None,
    route: EgressRoute | None = None,
    extra_credentials: Sequence[str] = (),
) -> Deliver:
    """Resolve the method's credentials once and return the admission ``deliver`` seam.

    Only the requirements the method's steps name are resolved, so a skill with several
    methods does not need every credential for each of them. Every host-supplied value and
    every resolved value enters ``taint`` before any step runs. The run store keeps the
    non-secret choice (``ResolvedCredential.describe()``: source and profile name) under
    ``credentials``; a resume resolves again from a new snapshot. The egress allow-list is
    ``egress``, the grant recorded in the run's ``authority`` (as its driver parsed it), so
    what is enforced is what the receipt's authority digest covers. ``route`` (the
    session's) sends checked requests somewhere other than the network, after the same guard.

    Raises:
        NeedsCredential: a named requirement has no source (nothing was delivered).
        CredentialError: ambiguity, audience or mode mismatch, an unknown profile, an
            undeclared credential, a key that fails to decrypt (see ``resolve_credentials``).
    """
    by_step = step_credentials(method)
    for value in (request_secrets or {}).values():
        taint.add(value)
    resolved: dict[str, Any] = {}
    # ``extra_credentials``: the connectors' requirements the method's operations use
    used = sorted({name for name in by_step.values() if name is not None} | set(extra_credentials))
    if used:
        from proctor.runtime.home.credentials import resolve_credentials, snapshot_environment

        assert skill.package.profile is not None
        snapshot = snapshot_environment(workspace_root, environ)
        try:
            resolved = resolve_credentials(
                skill.package.profile.credentials,
                skill=skill.package.name,
                workspace_root=workspace_root,
                env=snapshot,
                store=_credential_store(environ),
                profile=profile,
                host_secrets=request_secrets,
                taint=taint,
                only=used,
                identity=skill.identity or None,
            )
        except CredentialError as exc:
            if exc.code != "needs_credential":
                raise
            readiness = list((exc.details or {}).get("readiness") or [])
            raise NeedsCredential(exc.message, readiness) from exc
        store.update_run(
            run_id,
            data={"credentials": [resolved[name].describe() for name in sorted(resolved)]},
        )
    declared = declared_environment(skill, environ)
    return _lazy_seams(resolved, by_step, egress, taint, environ, route, declared)


def declared_environment(skill: LoadedSkill, environ: Mapping[str, str]) -> dict[str, str]:
    """The values of the variables the package's ``environment`` declares (``required`` and
    ``optional``), from the session's environment: what its process tools are given, beside
    the fixed inherited names. Non-secret by declaration: a name a credential is delivered
    under, or a ``PROCTOR_*`` setting, is refused when the package is parsed."""
    profile = skill.package.profile
    if profile is None:
        return {}
    names = [*profile.environment.required, *profile.environment.optional]
    return {name: environ[name] for name in names if name in environ}


def _lazy_seams(
    resolved: dict[str, Any],
    by_step: dict[str, str | None],
    egress: EgressGrant | None,
    taint: TaintSet,
    environ: Mapping[str, str],
    route: EgressRoute | None,
    declared: Mapping[str, str],
) -> Deliver:
    """The ``deliver`` seam: each effect class's part (network, process, connector operation)
    is built when a call of that class first asks, so a run that makes none imports none of
    the HTTP client, the egress guard or the process tools. Each part answers only for its
    own class ({} for any other); an operation's part, last, gives it its connector's
    credential and no other. The recorded allow-list is read here, so an altered record is
    refused before any step runs, as it always was.

    Raises:
        ConfigError: the run's recorded egress entries are not valid.
    """
    allow = recorded_egress(egress)
    parts: dict[str, Callable[[Any, Tool], dict[str, Any]]] = {}

    def part(kind: str) -> Callable[[Any, Tool], dict[str, Any]]:
        built = parts.get(kind)
        if built is not None:
            return built
        resolver = route.resolver if route else None
        pool_factory = route.pool_factory if route else None
        # a route's own destinations (proctor test's exchanges) widen its HTTP checks only
        http_allow = allow.merged(route.allow) if route and route.allow else allow
        if kind == "network":
            from proctor.runtime.tools.http import network_deliver

            built = network_deliver(
                resolved, by_step, allow=http_allow, taint=taint,
                resolver=resolver, pool_factory=pool_factory,
            )  # fmt: skip
        elif kind == "process":
            from proctor.runtime.tools.command import process_deliver

            built = process_deliver(
                resolved, by_step, taint=taint, environ=environ, declared=declared
            )
        else:
            from proctor.runtime.connectors.operations import operation_deliver

            built = operation_deliver(
                resolved, allow=http_allow, taint=taint,
                resolver=resolver, pool_factory=pool_factory,
            )  # fmt: skip
        parts[kind] = built
        return built

    def deliver(spec: Any, tool: Tool) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if tool.effect == "network":
            found.update(part("network")(spec, tool))
        if tool.effect == "process":
            found.update(part("process")(spec, tool))
        if tool.name.startswith(OPERATION_PREFIX):
            found.update(part("operation")(spec, tool))
        return found

    return deliver


def _credential_store(environ: Mapping[str, str]) -> CredentialStore:
    """The profile store of the session's environment (its ``PROCTOR_HOME`` and backend)."""
    from proctor.runtime.home.credentials import CredentialStore

    named = environ.get("PROCTOR_HOME")
    backend = environ.get("PROCTOR_SECRET_BACKEND", "").strip().lower() or None
    return CredentialStore(Path(named) if named else None, backend=backend)


def park_needs_credential(
    needed: NeedsCredential,
    *,
    run_id: str,
    skill: str,
    method: str,
    store: RunStore,
    audit: AuditLog,
    sanitizer: Sanitizer,
) -> RunEnvelope:
    """Record the run as ``needs_credential`` (unsealed, no step run) and return its envelope.

    The envelope's ``requests`` carry one ``{"kind": "credential", ...}`` readiness entry per
    missing requirement, with its setup commands; its ``notes`` repeat the commands for people.
    """
    requests = [{"kind": "credential", **entry} for entry in needed.readiness]
    notes = ["no step was run; set the credential up, then run the same command again"]
    for entry in needed.readiness:
        notes.extend(f"run: {command}" for command in entry.get("setup") or [])
    envelope = RunEnvelope(
        status="needs_credential",
        run_id=run_id,
        skill=skill,
        method=method,
        refusal=Refusal(code="needs_credential", message=needed.message),
        requests=requests,
        notes=notes,
    )
    # Readiness holds no material by construction; only the run's tainted values (host
    # handles) are scrubbed. The general sanitizer would hide names such as ``api_key``
    # that the operator needs to read here.
    doc = _scrub_tainted(envelope.to_json(), sanitizer.taint)
    store.update_run(
        run_id,
        status="needs_credential",
        data={"envelope": doc, "steps_run": 0, "needs_credential": requests},
    )
    audit.emit(
        "run_needs_credential",
        run_id=run_id,
        step_index=None,
        credentials=[str(entry.get("credential")) for entry in needed.readiness],
        problems=[str(entry.get("problem")) for entry in needed.readiness],
    )
    return RunEnvelope.model_validate(doc)


def _scrub_tainted(value: Any, taint: TaintSet) -> Any:
    if isinstance(value, str):
        return taint.scrub(value)
    if isinstance(value, dict):
        return {key: _scrub_tainted(item, taint) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrub_tainted(item, taint) for item in value]
    return value


def with_aliases(
    inner: Deliver,
    *,
    skill: str,
    workspace_root: Path,
    environ: Mapping[str, str],
    host_secrets: Mapping[str, str] | None,
    taint: TaintSet,
) -> Deliver:
    """``inner``, with credential aliases for a directive run: its ``http.request`` may name a
    credential its package does not declare (the reference kernel's ``auth_alias``), resolved
    when the call is made (:func:`proctor.runtime.home.credentials.aliases.resolve_alias`).
    Every value found enters ``taint`` before it is handed on, so it is scrubbed from every
    output before it is ever sent."""

    def resolve(alias: str) -> Any:
        from proctor.runtime.home.credentials.aliases import resolve_alias

        found = resolve_alias(
            alias,
            skill=skill,
            workspace_root=workspace_root,
            environ=environ,
            store=_credential_store(environ),
            host_secrets=host_secrets,
        )
        if found is not None:
            taint.add(found.secret.reveal())
        return found

    def deliver(spec: Any, tool: Tool) -> dict[str, Any]:
        out = inner(spec, tool)
        if tool.effect == "network":
            from proctor.runtime.tools.http import NETWORK_EXTRA

            net = out.get(NETWORK_EXTRA)
            if net is not None:
                out = {**out, NETWORK_EXTRA: replace(net, aliases=resolve)}
        return out

    return deliver
