"""The parts of a receipt the verifier's fast path needs without the strict parser.

:class:`ChildRef` (a parent's commitment to one child) and :data:`SEAL_REASONS` (the closed
vocabulary of ``seal_reason``) live here so that :mod:`proctor.receipts.scan` and the walk of
:mod:`proctor.receipts.verify` load without :mod:`proctor.receipts.model`, whose strict parser
(and the dataclasses it brings) is needed only for a receipt the recognizer does not take;
:mod:`proctor.receipts.model` exports both as its own.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["RECEIPT_ID", "SEAL_REASONS", "ChildPair", "ChildRef"]

#: Why a receipt sealed as it did, when the outcome alone does not say. Closed vocabulary.
SEAL_REASONS: dict[str, str] = {
    "inputs_invalid": "the inputs failed the method's or the tool's schema",
    "admission_refused": "admission refused: scope, schema, containment or the approval floor",
    "policy_refused": "a policy rule with enforcement block refused",
    "budget_exceeded": "a call, spend, concurrency or receipt budget would have been passed",
    "credential_unavailable": "a required credential could not be resolved or delivered",
    "tool_failed": "the tool ran and failed",
    "timeout": "the work ran past its time limit",
    "child_failed": "a step, call or child run below this one did not complete",
    "approval_declined": "a person declined an approval this work waited on",
    "approval_expired": "nobody decided an approval before its deadline; its default declined it",
    "deadline_passed": "the run's deadline (its authority's) passed before it ended",
    "host_closed": "the host closed the paused run (declined or superseded)",
    "operator_killed": "an operator or the supervisor stopped the work",
    "internal_error": "proctor itself failed; the run store holds the detail",
}


class ChildRef(NamedTuple):
    """A parent's commitment to one child: its id and its signed-body digest (equal values).

    A named tuple: the verifier builds one per receipt in the tree, and tuples build fast.
    """

    receipt_id: str
    body_digest: str


#: A child commitment as a plain pair ``(receipt_id, body_digest)``: what the verifier's walk
#: reads. A :class:`ChildRef` is one; the fast recognizer builds plain tuples (faster to build,
#: equal in value).
ChildPair = tuple[str, str]

#: A receipt id as a caller may give it: ``sha256:<64 lowercase hex>`` or the bare hex (its one
#: group). Nothing else names a receipt, nor a receipt file: the hex is the file's name.
RECEIPT_ID = re.compile(r"\A(?:sha256:)?([0-9a-f]{64})\Z")
