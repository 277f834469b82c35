"""Rules written in Cedar (``policies/*.cedar``), evaluated by the ``cedarpy`` binding in the
same admission path and order as YAML rules.

Each policy of a Cedar file is one rule of the policy set, at its place in the file-name order
every policy file shares, with the decision range of a YAML rule's guard:

- ``forbid``: a denial when the policy applies to the call; ``@enforcement`` decides what the
  denial does (``block``, the default, refuses and stops; ``warn`` records and goes on);
- ``permit``: an *allowing verdict* when the policy applies: recorded (outcome ``recorded``,
  with its ``@code`` and ``@message``) and evaluation goes on, exactly as a YAML guard returning
  ``GuardVerdict(allowed=True)``. A permit never overrides a refusal (the first refusal stops
  the policy step, whichever rule comes later) and never touches the approval floor, which is a
  later admission step: no rule asks, and no rule admits a change the floor holds.

A refusal or a recorded verdict names the policy's ``@id``. Mapping of a call (see
:func:`cedar_request`):

- principal ``Proctor::Skill::"<skill or directive>"``: the package whose run makes the call;
- action ``Proctor::Action::"<tool>"``;
- resource ``Proctor::Resource::"<first path, else url, else operation, else tool>"``;
- context ``{tool, resource, paths: Set<String>, reason, args}``: ``args`` the validated
  arguments as a Cedar record (a float becomes its decimal text, ``null`` is left out).

Annotations: ``@id`` (required, the rule id), ``@code`` (snake_case; default
``cedar_forbidden`` / ``cedar_permitted``), ``@message``, ``@description``, ``@enforcement``
(forbid only: ``block`` default, or ``warn``) and ``@on_error`` (``fail_closed`` default, or
``fail_open``). Refused at load (``PolicyLoadError`` code ``bad_cedar_policy``, naming the file
and the policy): a template, a policy without ``@id``, an unknown or malformed annotation
(``@decision``/``@approval`` among them: asking is the floor's, see ``docs/policies.md``),
``@enforcement`` on a permit, text Cedar does not parse. A policy whose evaluation errors (e.g.
a missing attribute read without ``has``) has *failed*: its ``on_error`` decides, as for any
guard.

:func:`cedar_schema` writes the Cedar schema (JSON form) of the tool catalogue, which
``proctor tool cedar-schema`` prints and against which policies can be validated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from proctor.errors import PolicyLoadError
from proctor.policy.guards import GuardContext, GuardVerdict
from proctor.policy.model import Enforcement, PolicyRule

__all__ = [
    "CEDAR_SUFFIX",
    "NAMESPACE",
    "CedarGuard",
    "cedar_request",
    "cedar_rules",
    "cedar_schema",
]

CEDAR_SUFFIX = ".cedar"
NAMESPACE = "Proctor"
_ANNOTATIONS = frozenset({"id", "code", "message", "description", "enforcement", "on_error"})
_PERMIT_ALL = "permit(principal, action, resource);\n"
_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")
_NO_ASK = frozenset({"decision", "approval", "ask"})
"""Annotations someone may expect to make a rule ask: refused with the reason, not ignored."""
_MAX_DEPTH = 8
_LONG = 2**63


def _value(value: Any, depth: int = 0) -> Any:
    """A JSON value as Cedar's JSON entity format reads it (``None`` where it has no form)."""
    if depth > _MAX_DEPTH or value is None:
        return None
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if -_LONG <= value < _LONG else str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            converted = _value(item, depth + 1)
            if converted is not None and isinstance(key, str) and key != "__entity":
                out[key] = converted
        return out
    if isinstance(value, list | tuple):
        return [v for v in (_value(item, depth + 1) for item in value) if v is not None]
    return str(value)


def _resource(ctx: GuardContext) -> str:
    if ctx.workspace_relpaths:
        return ctx.workspace_relpaths[0]
    for key in ("url", "operation", "path"):
        found = ctx.args.get(key)
        if isinstance(found, str) and found:
            return found
    return ctx.tool_name


def cedar_request(ctx: GuardContext) -> dict[str, Any]:
    """The Cedar request for one proposed call (see the module docstring)."""
    resource = _resource(ctx)
    return {
        "principal": {"type": f"{NAMESPACE}::Skill", "id": ctx.directive_id or ""},
        "action": {"type": f"{NAMESPACE}::Action", "id": ctx.tool_name},
        "resource": {"type": f"{NAMESPACE}::Resource", "id": resource},
        "context": {
            "tool": ctx.tool_name,
            "resource": resource,
            "paths": list(ctx.workspace_relpaths),
            "reason": ctx.reason,
            "args": _value(dict(ctx.args)) or {},
        },
    }


class CedarGuard:
    """The guard of one Cedar policy: for a ``forbid``, a denial when the policy forbids the
    call; for a ``permit``, an allowing verdict when the policy permits it; else silent.

    Raises (when called): ``RuntimeError`` when Cedar could not evaluate the policy; the
    policy step treats that as a failed guard (the rule's ``on_error``).
    """

    __slots__ = ("_policies", "code", "message", "permit", "policy_id")

    def __init__(
        self, policy_id: str, text: str, code: str, message: str, *, permit: bool = False
    ) -> None:
        import cedarpy

        self.policy_id = policy_id
        self.code = code
        self.message = message
        self.permit = permit
        # A forbid is asked beside a permit-all (Deny: it applies); a permit alone (Allow: it
        # applies; Cedar's default deny: it does not).
        self._policies = cedarpy.PolicySet.from_str(text if permit else _PERMIT_ALL + text)

    def __call__(self, ctx: GuardContext) -> GuardVerdict | None:
        import cedarpy

        result = cedarpy.is_authorized(cedar_request(ctx), self._policies, [])
        if result.diagnostics.errors:
            raise RuntimeError(f"Cedar could not evaluate policy '{self.policy_id}'")
        applies = (result.decision == cedarpy.Decision.Allow) == self.permit
        if not applies:
            return None
        metadata = {"cedar_policy_id": self.policy_id}
        if self.permit:
            metadata["cedar_effect"] = "permit"
        return GuardVerdict(self.permit, self.message, self.code, metadata)


def _bad(
    source: str, message: str, code: str = "bad_cedar_policy", policy: str | None = None
) -> PolicyLoadError:
    details = {"file": source} if policy is None else {"file": source, "policy": policy}
    shown = message if policy is None else f"policy '{policy}': {message}"
    return PolicyLoadError(f"{source}: {shown}", code=code, details=details)


def _annotations(source: str, rule_id: str, notes: Mapping[str, Any], permit: bool) -> None:
    """Refuse an unknown or malformed annotation, naming the file and the policy."""
    for name in sorted(notes):
        if name in _NO_ASK:
            raise _bad(
                source,
                f"@{name}: a policy rule refuses, warns or records an allowing verdict; it"
                " never asks. Asking is the approval floor's (authority effects: ask)",
                policy=rule_id,
            )
        if name not in _ANNOTATIONS:
            raise _bad(source, f"unknown annotation @{name}", policy=rule_id)
        if not isinstance(notes[name], str):
            raise _bad(source, f'@{name} takes one string, @{name}("...")', policy=rule_id)
    if permit and "enforcement" in notes:
        raise _bad(
            source,
            "@enforcement is a forbid's (what its denial does); a permit only records an"
            " allowing verdict",
            policy=rule_id,
        )
    if notes.get("enforcement", "block") not in ("block", "warn"):
        raise _bad(source, "@enforcement is block or warn", policy=rule_id)
    if notes.get("on_error", "fail_closed") not in ("fail_open", "fail_closed"):
        raise _bad(source, "@on_error is fail_open or fail_closed", policy=rule_id)
    if "code" in notes and not _CODE.fullmatch(notes["code"]):
        raise _bad(source, "@code is snake_case: a-z, 0-9 and _, at most 64", policy=rule_id)


def _tools(scope: Mapping[str, Any], known: frozenset[str], source: str) -> tuple[str, ...] | None:
    """The tools an action scope names (``None``: every tool); unknown tools are refused."""
    op = scope.get("op")
    if op == "All":
        return None
    if op == "==":
        entities = [scope.get("entity")]
    elif op == "in" and "entities" in scope:
        entities = list(scope["entities"])
    else:
        return None
    names = []
    for entity in entities:
        if not isinstance(entity, Mapping) or entity.get("type") != f"{NAMESPACE}::Action":
            raise _bad(source, f'an action is {NAMESPACE}::Action::"<tool>"')
        name = str(entity.get("id"))
        if name not in known:
            raise _bad(source, f"unknown tool {name!r} in an action", "unknown_tool")
        names.append(name)
    return tuple(names)


def cedar_rules(
    source: str, text: str, known_tools: Iterable[str], position: int = 0
) -> tuple[list[PolicyRule], dict[str, CedarGuard]]:
    """The rules of one Cedar file (file order) and their guards by guard name.

    Raises:
        PolicyLoadError: ``bad_cedar_policy`` (see the module docstring), ``unknown_tool``,
            ``cedar_unavailable`` (the ``cedarpy`` binding is not installed).
    """
    try:
        import cedarpy
    except ImportError as exc:
        raise _bad(
            source,
            "Cedar rules need the cedarpy binding (pip install 'proctor[cedar]')",
            "cedar_unavailable",
        ) from exc
    try:
        doc = json.loads(cedarpy.policies_to_json_str(text))
    except (ValueError, RuntimeError) as exc:
        raise _bad(source, f"Cedar cannot parse it: {str(exc)[:300]}") from exc
    if doc.get("templates"):
        raise _bad(source, "templates are not rules; write each policy out")
    known = frozenset(known_tools)
    rules: list[PolicyRule] = []
    guards: dict[str, CedarGuard] = {}
    policy_id = f"cedar:{source.rsplit('/', 1)[-1]}"
    for index, policy in enumerate(doc.get("staticPolicies", {}).values()):
        notes = policy.get("annotations") or {}
        rule_id = notes.get("id")
        if not isinstance(rule_id, str) or not rule_id.strip():
            raise _bad(source, f'policy #{index + 1} has no @id("..."): the rule id it refuses by')
        permit = policy.get("effect") == "permit"
        _annotations(source, rule_id, notes, permit)
        # A permit never refuses by its verdict: it is a warn rule (only a failure can refuse).
        enforcement: Enforcement = (
            "warn" if permit or notes.get("enforcement") == "warn" else "block"
        )
        on_error = notes.get("on_error", "fail_closed")
        verb = "permits" if permit else "forbids"
        one = json.dumps({"staticPolicies": {"p": policy}, "templates": {}, "templateLinks": []})
        policy_text = cedarpy.policies_from_json_str(one)
        guard_name = f"cedar:{rule_id}"
        guards[guard_name] = CedarGuard(
            rule_id,
            policy_text,
            str(notes.get("code") or ("cedar_permitted" if permit else "cedar_forbidden")),
            str(notes.get("message") or f"Cedar policy '{rule_id}' {verb} this call"),
            permit=permit,
        )
        rules.append(
            PolicyRule(
                rule_id,
                str(notes.get("description") or policy_text),
                guard_name,
                enforcement,
                on_error,
                _tools(policy.get("action") or {}, known, source),
                source,
                position + index,
                policy_id,
                scope=policy_text,  # the set's digest covers the policy's exact text
            )
        )
    return rules, guards


_TYPES = {"string": "String", "integer": "Long", "boolean": "Boolean"}


def _cedar_type(schema: Any, depth: int = 0) -> dict[str, Any] | None:
    """A JSON Schema as a Cedar schema type (``None``: no Cedar form, the attribute is left
    out of the record)."""
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return None
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else None
    if kind in _TYPES:
        return {"type": _TYPES[kind]}
    if kind == "number":
        return {"type": "String"}
    if kind == "array":
        element = _cedar_type(schema.get("items"), depth + 1)
        return None if element is None else {"type": "Set", "element": element}
    if kind == "object":
        required = set(schema.get("required") or ())
        attributes = {}
        for name, sub in (schema.get("properties") or {}).items():
            typed = _cedar_type(sub, depth + 1)
            if typed is not None:
                attributes[name] = {**typed, "required": name in required}
        return {"type": "Record", "attributes": attributes}
    return None


def cedar_schema(tools: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The Cedar schema (JSON form) of a tool catalogue: ``tools`` maps a tool name to its
    input JSON Schema. Every action applies to ``Skill`` principals and ``Resource`` resources,
    with the context of :func:`cedar_request` (``args`` typed from the tool's schema)."""
    actions = {}
    for name, schema in sorted(tools.items()):
        args = _cedar_type(schema) or {"type": "Record", "attributes": {}}
        if args.get("type") != "Record":
            args = {"type": "Record", "attributes": {}}
        actions[name] = {
            "appliesTo": {
                "principalTypes": ["Skill"],
                "resourceTypes": ["Resource"],
                "context": {
                    "type": "Record",
                    "attributes": {
                        "tool": {"type": "String"},
                        "resource": {"type": "String"},
                        "paths": {"type": "Set", "element": {"type": "String"}},
                        "reason": {"type": "String"},
                        "args": args,
                    },
                },
            }
        }
    return {
        NAMESPACE: {
            "entityTypes": {"Skill": {}, "Resource": {}},
            "actions": actions,
        }
    }
