"""Reports of a ``proctor test`` invocation: ``proctor.test.v1`` JSON and JUnit XML.

Both are built from the same scrubbed document: every fixture credential value of every test
(and its encodings) is replaced by ``[REDACTED:tainted]`` wherever it would appear, in a
message, an expected or an actual value, before anything is printed or written.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from proctor.contracts.testreport import SuiteReport
from proctor.runtime.boundary.sanitize import TaintSet
from proctor.testing.runner import CaseResult

__all__ = ["build_report", "junit_xml", "render_authority", "render_failure"]


def build_report(results: Sequence[CaseResult]) -> dict[str, Any]:
    """The ``proctor.test.v1`` document of ``results``, scrubbed of every fixture secret."""
    taint = TaintSet(s for r in results for s in r.secrets)
    tests = []
    for r in results:
        entry: dict[str, Any] = {
            "id": r.test_id,
            "file": r.case.label,
            "status": r.status,
            "duration_s": round(r.duration_s, 6),
            "run_id": r.run_id,
            "run_status": r.run_status,
            "outcome": r.outcome,
            "receipt_id": r.receipt_id,
            "failures": [f.to_json() for f in r.failures],
            "error": r.error,
            "workspace": str(r.workspace) if r.workspace is not None else None,
        }
        if r.authority is not None:
            entry["authority"] = r.authority
        tests.append(entry)
    summary = {
        "total": len(results),
        "passed": sum(r.status == "passed" for r in results),
        "failed": sum(r.status == "failed" for r in results),
        "errors": sum(r.status == "error" for r in results),
        "duration_s": round(sum(r.duration_s for r in results), 6),
    }
    doc = _scrub({"schema": "proctor.test.v1", "summary": summary, "tests": tests}, taint)
    validated: dict[str, Any] = SuiteReport.model_validate(doc).model_dump(
        mode="json", by_alias=True, exclude_unset=True
    )
    return validated


def _scrub(value: Any, taint: TaintSet) -> Any:
    if not taint:
        return value
    if isinstance(value, str):
        return taint.scrub(value)
    if isinstance(value, dict):
        return {taint.scrub(str(k)): _scrub(v, taint) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, taint) for v in value]
    return value


def render_authority(authority: dict[str, Any]) -> str:
    """A test's ``authority`` in one line for people: policies, host authority, egress."""
    from proctor.policy.loader import SHIPPED_PREFIX

    shipped = sum(1 for p in authority["policies"] if p.startswith(SHIPPED_PREFIX))
    own = [p for p in authority["policies"] if not p.startswith(SHIPPED_PREFIX)]
    parts = [f"{shipped} shipped policy files" + (f" + {', '.join(own)}" if own else "")]
    guards = authority["guard_modules"]
    parts.append(f"guard modules: {', '.join(guards)}" if guards else "no package guard module")
    held = authority.get("authority") or {}
    if held:
        parts.append(f"effects {held.get('effects', '?')}, reach {held.get('reach', '?')}")
    egress = authority["egress"]
    http = authority["http"]
    parts.append(
        "network: "
        + (f"{len(http)} declared exchange(s)" if http else "none")
        + (f", egress {', '.join(egress)}" if egress else "")
    )
    if authority.get("processes"):
        parts.append(f"processes stood in: {', '.join(authority['processes'])}")
    if authority["credentials"]:
        parts.append(f"credentials: {', '.join(authority['credentials'])} (fixtures)")
    return "ran under " + "; ".join(parts)


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def render_failure(failure: dict[str, Any]) -> list[str]:
    """A report failure as lines for people: the message, then expected and actual."""
    lines = [str(failure["message"])]
    if "expected" in failure:
        lines.append(f"  expected {_show(failure['expected'])}")
    if "actual" in failure:
        lines.append(f"  actual   {_show(failure['actual'])}")
    return lines


def junit_xml(report: dict[str, Any]) -> bytes:
    """The report as JUnit XML: one ``testsuite`` per package, one ``testcase`` per test; a
    failed test carries a ``failure`` (each check's diff), one that could not run an
    ``error``."""
    suites: dict[str, list[dict[str, Any]]] = {}
    for test in report["tests"]:
        suites.setdefault(test["id"].split("/", 1)[0], []).append(test)
    root = ET.Element(
        "testsuites",
        name="proctor test",
        tests=str(report["summary"]["total"]),
        failures=str(report["summary"]["failed"]),
        errors=str(report["summary"]["errors"]),
        time=f"{report['summary']['duration_s']:.3f}",
    )
    for package, tests in suites.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=package,
            tests=str(len(tests)),
            failures=str(sum(t["status"] == "failed" for t in tests)),
            errors=str(sum(t["status"] == "error" for t in tests)),
            time=f"{sum(t['duration_s'] for t in tests):.3f}",
        )
        for test in tests:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=package,
                name=test["id"].split("/", 1)[-1],
                file=test["file"],
                time=f"{test['duration_s']:.3f}",
            )
            if test.get("authority"):
                props = ET.SubElement(case, "properties")
                ET.SubElement(
                    props, "property", name="authority", value=render_authority(test["authority"])
                )
            if test["status"] == "failed":
                failures = test.get("failures") or []
                node = ET.SubElement(
                    case, "failure", message=failures[0]["message"] if failures else "failed"
                )
                node.text = "\n".join(line for f in failures for line in render_failure(f))
            elif test["status"] == "error":
                error = test.get("error") or {}
                node = ET.SubElement(
                    case, "error", message=str(error.get("message")), type=str(error.get("code"))
                )
                node.text = str(error.get("message"))
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"
