"""What a model is shown beside its turn: policy rules as labelled context, and the context
budget that keeps a long turn's conversation under the model's limit.

The seam: :mod:`.loop` drives a turn; this module decides what of the run's policy text and of
the turn's own history the model sees. Neither changes what a call may do: admission checks
every call whatever the model was shown.

Policy rules (:func:`rules_text`) are given as the reference kernel gives them: each rule's id
and description, under its policy's id, in the system prompt, with whether proctor enforces it
(a guard checks every call) or it is advisory (text only, for the model to follow). The router
of ``proctor ask`` is given the ``router`` policy's rules the same way (:func:`router_text`).

The context budget (:class:`ContextBudget`) counts the conversation in characters (the
dialects' bodies as JSON; about four characters a token). Before a request would go over
``max_chars``, the oldest tool results are replaced by a short summary of what they were
(tool, status, size, digest), oldest first, never the latest; every replacement is recorded in
the turn's statistics and the run's audit log by the caller.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from proctor.contracts import json_strict
from proctor.contracts.values import dataclass, field
from proctor.errors import ParseError

__all__ = [
    "DEFAULT_CONTEXT_CHARS",
    "ContextBudget",
    "Elided",
    "router_text",
    "rules_text",
]

DEFAULT_CONTEXT_CHARS = 400_000
"""The default budget of a managed turn's conversation (about 100,000 tokens)."""


def rules_text(rules: Iterable[Mapping[str, Any]]) -> str:
    """The policy rules section of a directive turn's system prompt (empty without rules)."""
    by_policy: dict[str, list[Mapping[str, Any]]] = {}
    for rule in rules:
        by_policy.setdefault(str(rule.get("policy") or "policy"), []).append(rule)
    if not by_policy:
        return ""
    lines = [
        "## Policy rules (context: this workspace's policies, as their authors wrote them)",
        "",
        'Rules marked "enforced" are checked by proctor on every call you make, whatever you'
        ' do. Rules marked "advisory" are not checked by anything: follow them.',
        "",
    ]
    for policy, members in by_policy.items():
        lines.append(f"### {policy}")
        for rule in members:
            kind = "enforced" if rule.get("enforced") else "advisory"
            lines.append(f"- **{rule.get('id')}** ({kind}): {rule.get('description')}")
        lines.append("")
    return "\n".join(lines).rstrip()


def router_text(rules: Iterable[Mapping[str, Any]]) -> str:
    """The router policy section of the router's system prompt (empty without rules)."""
    listed = [f"- **{r.get('id')}**: {r.get('description')}" for r in rules]
    if not listed:
        return ""
    return "\n".join(
        [
            "# Router policy (context: rules from this workspace's router policy; follow them)",
            "",
            *listed,
        ]
    )


@dataclass
class Elided:
    """One tool result replaced by its summary to keep the conversation under budget."""

    tool: str
    status: str
    chars: int
    digest: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form (audit log, turn statistics)."""
        return {"tool": self.tool, "status": self.status, "chars": self.chars,
                "digest": self.digest}  # fmt: skip


@dataclass
class ContextBudget:
    """Keeps a turn's conversation under ``max_chars`` by summarising older tool results.

    Attributes:
        max_chars: the most characters a request body may hold (JSON).
        elided: every result replaced so far in this turn, oldest first.
    """

    max_chars: int = DEFAULT_CONTEXT_CHARS
    elided: list[Elided] = field(default_factory=list)

    def fit(self, results: list[str], size: int) -> list[tuple[int, str]]:
        """Which results to replace, and by what, so that ``size`` falls under the budget.

        Args:
            results: the conversation's tool results as they stand, oldest first (already
                summarised ones included).
            size: the conversation's size now, in characters.

        Returns:
            ``(index, summary)`` pairs, oldest first; never the latest result, which the
            model has not read yet. Each is recorded in :attr:`elided`. The conversation may
            still be over the budget when every older result is summarised already.
        """
        chosen: list[tuple[int, str]] = []
        for index, text in enumerate(results[:-1]):
            if size <= self.max_chars:
                break
            if _is_summary(text):
                continue
            item = _describe(text)
            replacement = json.dumps(
                {
                    _MARK: True,
                    **item.to_dict(),
                    "note": "an older tool result, summarised to keep this conversation under"
                    " its context budget; call the tool again if you need its content",
                }
            )
            size -= len(text) - len(replacement)
            chosen.append((index, replacement))
            self.elided.append(item)
        return chosen


_MARK = "elided_by_context_budget"


def _describe(text: str) -> Elided:
    tool = status = "unknown"
    with contextlib.suppress(ParseError, AttributeError):
        document = json_strict.loads(text, source="tool result")
        tool = str(document.get("tool") or "unknown")[:200]
        status = str(document.get("status") or "unknown")[:40]
    digest = "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
    return Elided(tool, status, len(text), digest)


def _is_summary(text: str) -> bool:
    return _MARK in text[:40]
