"""``receipts.explain``: verify a receipt tree of this workspace and say what it records.

The tool reads receipts only from the run's own receipt store, by id: its ``receipt``
argument is a receipt id (``sha256:<hex>`` or bare hex) or a file name ending ``<hex>.json``,
of which only the hex is used, so no path it is given is ever opened. The tree is verified
under the keys the run's session trusts (its signer and the home's trusted keys) before
anything is explained; a tree that does not verify is reported as such and not explained.

What it explains comes from the signed receipts: the run (skill, method, outcome, the registry
or core package it ran as), every step and call in order with its outcome and seal reason,
policy verdicts, standing approvals and who decided a request. Where this workspace's run
store still holds the run, and its recorded authority digests to the receipt's
``authority_digest``, the authority (effects, reach, who set it) and each refused call's
refusal code are added from it; otherwise the explanation says it has only the digest.
"""

from __future__ import annotations

import re
from typing import Any

from proctor.core.resume import decision_words
from proctor.errors import ToolFailed
from proctor.runtime.tools.base import Tool, ToolContext

__all__ = ["RECEIPTS_EXPLAIN", "RECEIPTS_EXTRA"]

RECEIPTS_EXTRA = "receipts"
"""``ctx.extras`` key: ``{"load": receipt id -> bytes | None, "keys": [PublicKey]}``."""

_HEX = re.compile(r"(?:sha256:)?([0-9a-f]{64})(?:\.json)?")
_MAX_NODES = 5_000
_RUN_SCAN = 500


def _receipt_id(text: str) -> str:
    name = text.strip().lower().replace("\\", "/").rsplit("/", 1)[-1]
    match = _HEX.fullmatch(name)
    if match is None:
        raise ToolFailed(
            "receipt must be a receipt id (sha256:<hex>) or a receipt file name <hex>.json",
            code="receipt_target_invalid",
        )
    return "sha256:" + match.group(1)


def _node(load: Any, receipt_id: str, depth: int, out: list[dict[str, Any]]) -> None:
    from proctor.receipts.model import parse_envelope

    if len(out) >= _MAX_NODES:
        return
    data = load(receipt_id)
    if data is None:  # verified trees have every child; a guard, not a path
        return
    env = parse_envelope(data)
    body = env.body
    subject = body["subject"]
    node = {
        "receipt_id": receipt_id,
        "kind": body["kind"],
        "depth": depth,
        "skill": subject["skill"],
        "method": subject["method"],
        "step": subject["step_id"],
        "tool": subject["tool"],
        "outcome": body["outcome"],
        "seal_reason": body["seal_reason"],
        "verdicts": body["verdicts"],
        "signed": env.signature is not None,
    }
    if "package" in body:
        node["package"] = body["package"]
    out.append(node)
    for child in env.children:
        _node(load, child.receipt_id, depth + 1, out)


def _run_record(ctx: ToolContext, receipt_id: str) -> Any:
    for record in ctx.store.list_runs(limit=_RUN_SCAN):
        if record.receipt_id == receipt_id:
            return record
    return None


def _authority(ctx: ToolContext, root: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    from proctor.receipts.canonical import digest
    from proctor.runtime.boundary.reach import authority_record

    record = _run_record(ctx, root["receipt_id"])
    if record is None:
        return {
            "known": False,
            "digest": body["authority_digest"],
            "refusal_codes": {},
            "decisions": [],
        }
    held = authority_record(record.data)
    if digest(held) != body["authority_digest"]:
        return {
            "known": False,
            "digest": body["authority_digest"],
            "refusal_codes": {},
            "decisions": [],
        }
    codes: dict[str, list[str]] = {}
    for call in ctx.store.calls(record.run_id):
        settled = call.result if isinstance(call.result, dict) else {}
        error = settled.get("error") or {}
        if settled.get("status") in ("refused", "failed") and error.get("code"):
            codes.setdefault(f"{call.step_id}/{call.tool}", []).append(str(error["code"]))
    decisions = []
    for request in ctx.store.requests(record.run_id):
        # who decided, approved or declined (or the answers), and the reason: in words
        words = decision_words(request.decision)
        if words is not None and request.kind in ("approval", "question", "retry"):
            decisions.append(f"{request.address} {words}")
    return {
        "known": True,
        "decisions": decisions,
        "digest": body["authority_digest"],
        "effects": held.get("effects"),
        "reach": held.get("reach"),
        "set_by": held.get("set_by"),
        "refusal_codes": codes,
    }


def _explain_verdicts(verdicts: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    refused, approved = [], []
    for v in verdicts:
        rule, code = v["rule_id"], v["code"]
        if code.startswith("decided_by:"):
            approved.append(f"{rule.removeprefix('decision:')} decided by {code[11:]}")
        elif code == "approved_by_standing":
            approved.append(f"approved by standing approval {rule}")
        elif v["enforcement"] == "block":
            refused.append(f"policy rule {rule} refused it ({code})")
        elif rule != "sandbox":
            refused.append(f"policy rule {rule} warned ({code})")
    return refused, approved


def _words(nodes: list[dict[str, Any]], authority: dict[str, Any]) -> dict[str, Any]:
    root = nodes[0]
    lines = []
    where = f"{root['skill']}#{root['method']}"
    package = root.get("package")
    if package:
        where += f" (as {package['source']} package {package['name']}@{package['version']})"
    lines.append(f"Run of {where}: {root['outcome']}" + _reason(root) + ".")
    if authority["known"]:
        lines.append(
            f"Authority: effects {authority['effects']}, reach {authority['reach']}, set by "
            f"{authority['set_by']}."
        )
    else:
        lines.append(
            f"Authority: digest {authority['digest']} (this workspace's run store no longer"
            " holds the run, so only the digest is known)."
        )
    steps, refusals, approvals = [], [], []
    step: str | None = None
    for node in nodes[1:]:
        refused, approved = _explain_verdicts(node["verdicts"])
        approvals += [a for a in approved if a not in approvals]
        if node["kind"] == "step" and node["depth"] == 1:
            step = node["step"]
            steps.append(
                {"step": step, "outcome": node["outcome"], "seal_reason": node["seal_reason"]}
            )
            lines.append(f"Step {step}: {node['outcome']}" + _reason(node) + ".")
        elif node["kind"] == "call" and node["depth"] == 2:
            codes = authority["refusal_codes"].get(f"{node['step']}/{node['tool']}") or []
            said = f"  Call {node['tool']} in step {node['step']}: {node['outcome']}"
            said += _reason(node)
            if node["outcome"] != "completed":
                code = codes.pop(0) if codes else None
                refusals.append(
                    {
                        "step": node["step"],
                        "tool": node["tool"],
                        "outcome": node["outcome"],
                        "seal_reason": node["seal_reason"],
                        "code": code,
                        "policy": refused,
                    }
                )
                if code:
                    said += f", code {code}"
            lines.append(said + "." + "".join(f" {r}." for r in refused))
        elif node["kind"] == "run":
            lines.append(
                f"  Child run {node['skill']}#{node['method']} (in step {step}): "
                f"{node['outcome']}" + _reason(node) + "."
            )
    # the run store's decisions say approved or declined and why; a verdict of the receipt
    # names who decided an address the store no longer holds
    decided = {d.split(" ")[0] for d in authority["decisions"]}
    approvals = list(authority["decisions"]) + [
        a for a in approvals if a.split(" ")[0] not in decided
    ]
    if approvals:
        lines.append("Approvals: " + "; ".join(approvals) + ".")
    else:
        lines.append("Approvals: none recorded.")
    if not refusals:
        lines.append("Refusals: none.")
    return {"steps": steps, "refusals": refusals, "approvals": approvals, "text": "\n".join(lines)}


def _reason(node: dict[str, Any]) -> str:
    from proctor.receipts.model import SEAL_REASONS

    reason = node["seal_reason"]
    return "" if reason is None else f" ({reason}: {SEAL_REASONS.get(reason, reason)})"


def _explain(ctx: ToolContext, args: dict[str, Any]) -> dict[str, Any]:
    from proctor.receipts.model import parse_envelope
    from proctor.receipts.verify import verify_tree

    seam = ctx.extras.get(RECEIPTS_EXTRA)
    if not isinstance(seam, dict):
        raise ToolFailed(
            "receipts.explain reads the receipts of the run's own workspace and has none here",
            code="receipts_unavailable",
        )
    receipt_id = _receipt_id(str(args["receipt"]))
    load = seam["load"]
    if load(receipt_id) is None:
        raise ToolFailed(
            f"no receipt {receipt_id} in this workspace's receipt store", code="receipt_not_found"
        )
    result = verify_tree(receipt_id, load, seam["keys"])
    out: dict[str, Any] = {
        "receipt_id": receipt_id,
        "verification": {
            "status": result.status,
            "reason": result.reason,
            "message": result.message,
            "receipts": result.receipts,
        },
    }
    if result.status == "invalid":
        out.update(
            steps=[],
            refusals=[],
            approvals=[],
            authority=None,
            text=f"The receipt tree does not verify: {result.message}. It is not "
            "explained: what it says cannot be trusted.",
        )
        return out
    nodes: list[dict[str, Any]] = []
    _node(load, receipt_id, 0, nodes)
    body = parse_envelope(load(receipt_id)).body
    if body["kind"] != "run":
        raise ToolFailed(
            f"{receipt_id} is a {body['kind']} receipt; explain a run's receipt",
            code="receipt_not_a_run",
        )
    authority = _authority(ctx, nodes[0], body)
    words = _words(nodes, authority)
    status = "Verified" if result.status == "verified" else "Intact but unverified"
    words["text"] = f"{status}: {result.message}.\n" + words["text"]
    out.update(words)
    out["authority"] = {
        k: v for k, v in authority.items() if k not in ("refusal_codes", "decisions")
    }
    out["run"] = {
        k: nodes[0].get(k) for k in ("skill", "method", "outcome", "seal_reason", "package")
    }
    return out


_OBJ: dict[str, Any] = {"type": "object"}

RECEIPTS_EXPLAIN = Tool(
    name="receipts.explain",
    description=(
        "Verify a run's receipt tree from this workspace's receipt store and explain it: what"
        " ran, under what authority, what was refused or approved."
    ),
    schema={
        "type": "object",
        "additionalProperties": False,
        "required": ["receipt"],
        "properties": {"receipt": {"type": "string", "minLength": 1, "maxLength": 300}},
    },
    effect="read",
    handler=_explain,
    output_schema={
        "type": "object",
        "required": ["receipt_id", "verification", "steps", "refusals", "approvals", "text"],
        "properties": {
            "receipt_id": {"type": "string"},
            "verification": _OBJ,
            "run": _OBJ,
            "authority": {"type": ["object", "null"]},
            "steps": {"type": "array"},
            "refusals": {"type": "array"},
            "approvals": {"type": "array"},
            "text": {"type": "string"},
        },
    },
)
