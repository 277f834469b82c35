"""Print the cost of the sanitizer: median and p95 microseconds per call.

The 4 KiB samples are what a governed fs.read scrubs; the small values are what every audit
line carries (digests, ids, codes, timestamps), which take the no-scan fast paths.

Run: .venv/bin/python bench/sanitize.py
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from _timing import measure as timed
from proctor.runtime.boundary.sanitize import TaintSet, scrub_text, scrub_value

PROSE = (
    "The quick brown fox jumps over the lazy dog. Governed calls read files, record what "
    "happened and return the content to the agent, which drafts a reply for a person.\n"
)
CODE = Path(__file__).read_text(encoding="utf-8")
ROOT = Path(__file__).resolve().parents[1]


def _sample(text: str, size: int = 4096) -> str:
    return (text * (size // len(text) + 1))[:size]


def measure(label: str, fn: Callable[[], Any], rounds: int = 5000, warm: int = 200) -> float:
    return timed(label, fn, rounds, warm=warm, width=44)


def main() -> None:
    prose, code = _sample(PROSE), _sample(CODE)
    taint = TaintSet(["tr0ub4dor&3-horse-staple", "hunter2", "s3cr3t-token-value"])
    small = {
        "tool": "fs.read",
        "path": "notes/today.md",
        "content_digest": "sha256:" + "ab" * 32,
        "size": 4096,
        "reason": "read the notes before drafting a reply",
        "ok": True,
    }
    # the governed-call bench reads this file's first 4 KiB
    source = (ROOT / "src/proctor/runtime/admission/governor.py").read_text(encoding="utf-8")[:4096]
    audit_fields = {
        "tool": "fs.read",
        "call_id": "s/7",
        "step": "s",
        "effect": "read",
        "outcome": "completed",
        "code": None,
        "paths": ["notes/today.md"],
        "args_digest": "sha256:" + "7c" * 32,
        "outputs_digest": "sha256:" + "03" * 32,
        "result_redacted": [],
    }
    github_sample = prose[:2000] + " ghp_" + "A1b2" * 9 + " " + prose[2000:4050]
    # a delivered secret echoed split one character a line, and as decimal character references
    split_sample = prose[:2000] + "\n".join("s3cr3t-token-value") + prose[2000:4000]
    entity_sample = prose[:2000] + "".join(f"&#{ord(c)};" for c in "s3cr3t-token-value")
    entity_sample += prose[2000 : 4096 - len(entity_sample) + 2000]
    measure("scrub_text 4 KiB prose, clean", lambda: scrub_text(prose))
    measure("scrub_text 4 KiB python source, clean", lambda: scrub_text(code))
    measure("scrub_text 4 KiB admission.py source", lambda: scrub_text(source))
    measure("scrub_text 4 KiB prose, 3 tainted values", lambda: scrub_text(prose, taint))
    measure("scrub_text 4 KiB prose, one GitHub token", lambda: scrub_text(github_sample))
    measure("scrub_text 4 KiB, secret one char a line", lambda: scrub_text(split_sample, taint))
    measure("scrub_text 4 KiB, secret as &#NN; refs", lambda: scrub_text(entity_sample, taint))
    measure("scrub_value small dict (6 fields)", lambda: scrub_value(small))
    measure("scrub_value small dict, 3 tainted values", lambda: scrub_value(small, taint))
    measure("scrub_value audit tool_call fields", lambda: scrub_value(audit_fields))
    measure("scrub_text sha256 digest", lambda: scrub_text("sha256:" + "ab" * 32))
    measure("scrub_text uuid", lambda: scrub_text("0f8fad5b-d9cb-469f-a165-70867728950e"))
    measure("scrub_text ISO timestamp", lambda: scrub_text("2026-11-30T05:17:53.123456+00:00"))
    measure("scrub_text identifier", lambda: scrub_text("tool_call"))


if __name__ == "__main__":
    main()
