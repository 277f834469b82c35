"""Policy rules and the ordered, digested set a run enforces.

Both are valid by construction: the loader builds them only after every check passed, and
:class:`PolicySet` fixes the evaluation order and the digest a receipt records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from proctor.contracts.values import dataclass
from proctor.receipts.canonical import digest as canonical_digest

__all__ = [
    "ENFORCEMENTS",
    "ON_ERRORS",
    "Enforcement",
    "OnError",
    "PolicyRule",
    "PolicySet",
]

Enforcement = Literal["advisory", "warn", "block"]
OnError = Literal["fail_open", "fail_closed"]

ENFORCEMENTS: frozenset[str] = frozenset({"advisory", "warn", "block"})
ON_ERRORS: frozenset[str] = frozenset({"fail_open", "fail_closed"})


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """One rule of a policy file, in the reference kernel's format.

    Attributes:
        id: rule id, unique across everything loaded.
        description: what the rule asks, in words (advisory rules are only this).
        guard: the registered guard that enforces it, or ``None`` for an advisory-only rule.
        enforcement: ``advisory`` (never evaluated), ``warn`` (denial recorded, call goes on)
            or ``block`` (denial refuses the call).
        on_error: what a raising or missing guard means: ``fail_open`` (recorded, call goes
            on) or ``fail_closed`` (refused with code ``guard_error``).
        tools: the proctor tools the rule covers (reference names already mapped), or
            ``None`` for every tool.
        source_file: the file it came from, as displayed (never a host path).
        position: its 0-based index in that file's ``rules`` list.
        policy_id: the ``id`` of the policy file holding it.
        directives: directive ids the rule is limited to, or ``None`` for all.
        scope: the reference format's free-text ``scope`` label, kept for display.
        declared_tools: ``tools`` as written in the file (for messages and drift reports).
    """

    id: str
    description: str
    guard: str | None
    enforcement: Enforcement
    on_error: OnError
    tools: tuple[str, ...] | None
    source_file: str
    position: int
    policy_id: str = ""
    directives: tuple[str, ...] | None = None
    scope: str | None = None
    declared_tools: tuple[str, ...] | None = None

    @property
    def enforceable(self) -> bool:
        """Whether the rule is evaluated on calls (a guard, and enforcement warn or block)."""
        return self.guard is not None and self.enforcement != "advisory"

    @property
    def ref(self) -> str:
        """``file: rule 'id'``, how messages name the rule."""
        return f"{self.source_file}: rule '{self.id}'"

    def canonical(self) -> dict[str, Any]:
        """The rule as a JSON-ready mapping (what the set digest covers)."""
        return {
            "policy_id": self.policy_id,
            "id": self.id,
            "description": self.description,
            "guard": self.guard,
            "enforcement": self.enforcement,
            "on_error": self.on_error,
            "tools": list(self.tools) if self.tools is not None else None,
            "directives": list(self.directives) if self.directives is not None else None,
            "scope": self.scope,
        }


class PolicySet:
    """The rules a run enforces, in evaluation order, with a digest over them.

    Order is fixed by the loader (shipped files, then the workspace's, each by file name, then
    position in the file). ``rules_for(tool)`` is precomputed per tool on first use, because it
    runs on every call.
    """

    __slots__ = (
        "_by_tool",
        "_digest",
        "enforceable",
        "guards",
        "policy_ids",
        "rules",
        "warnings",
    )

    def __init__(
        self,
        rules: Iterable[PolicyRule],
        policy_ids: Iterable[str],
        warnings: Iterable[str] = (),
        guards: Mapping[str, object] | None = None,
    ) -> None:
        self.guards: Mapping[str, object] = dict(guards or {})
        """The set's own guards (a Cedar policy's), looked up before the registry's."""
        self.rules: tuple[PolicyRule, ...] = tuple(rules)
        self.policy_ids: tuple[str, ...] = tuple(policy_ids)
        self.warnings: tuple[str, ...] = tuple(warnings)
        self.enforceable: tuple[PolicyRule, ...] = tuple(r for r in self.rules if r.enforceable)
        self._by_tool: dict[str, tuple[PolicyRule, ...]] = {}
        self._digest: str | None = None

    def rules_for(self, tool: str) -> tuple[PolicyRule, ...]:
        """The enforceable rules covering ``tool``, in evaluation order."""
        cached = self._by_tool.get(tool)
        if cached is None:
            cached = tuple(r for r in self.enforceable if r.tools is None or tool in r.tools)
            self._by_tool[tool] = cached
        return cached

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` over RFC 8785 canonical JSON of the policy ids and rules, in order."""
        if self._digest is None:
            doc = {
                "policy_ids": list(self.policy_ids),
                "rules": [r.canonical() for r in self.rules],
            }
            self._digest = canonical_digest(doc)
        return self._digest

    def rule(self, rule_id: str) -> PolicyRule | None:
        """The rule with ``rule_id``, or ``None``."""
        for r in self.rules:
            if r.id == rule_id:
                return r
        return None

    def __len__(self) -> int:
        return len(self.rules)

    def __repr__(self) -> str:
        return (
            f"PolicySet({len(self.rules)} rules, {len(self.enforceable)} enforceable, "
            f"policies={list(self.policy_ids)})"
        )
