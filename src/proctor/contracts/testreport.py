"""``proctor.test.v1``: what ``proctor test --json`` prints. Its JSON Schema is emitted by
:func:`suite_report_schema`.

One document per invocation: a ``summary`` and one entry per test, in the order they ran.
A test is ``passed``, ``failed`` (``failures`` says which checks, each with a JSON pointer and
both sides where they apply) or ``error`` (the test could not run as written: ``error`` holds
the code and message). No fixture credential value ever appears in it.

Each test that ran names the authority it ran under (``authority``): the policy files (the
shipped ones and the test's own ``fixtures/policies/``) with the digest the run enforced, the
workspace guard modules loaded (none: a test never loads a package's ``proctor.toml``, guard
module or ``.proctor/``), the host authority the run recorded, and where its egress and
credentials came from (the test file's ``setup.egress``, ``providers.http`` and
``setup.credentials``, by provider name only).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "TEST_REPORT_SCHEMA",
    "CaseAuthority",
    "CaseError",
    "CaseFailure",
    "CaseReport",
    "SuiteReport",
    "SuiteSummary",
    "suite_report_schema",
]

TEST_REPORT_SCHEMA: Literal["proctor.test.v1"] = "proctor.test.v1"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CaseFailure(_Model):
    """One failed check: ``check`` names it, ``pointer`` where (RFC 6901), and ``expected``
    and ``actual`` the two sides (absent when a side has no value)."""

    check: str
    message: str
    pointer: str | None = None
    expected: Any = None
    actual: Any = None


class CaseError(_Model):
    """Why a test could not run: a stable ``code`` and a message."""

    code: str
    message: str


class CaseAuthority(_Model):
    """What one test ran under: the shipped policies plus what its test file declares."""

    policies: list[str] = Field(
        description="policy files loaded: proctor's shipped ones, then the test's own policies/"
    )
    policy_digest: str | None = Field(
        default=None, description="digest of the policy set the run enforced"
    )
    guard_modules: list[str] = Field(
        description="workspace guard modules loaded (a test never loads the package's: empty)"
    )
    authority: dict[str, Any] | None = Field(
        default=None,
        description="the host authority the run recorded (setup.authority or the default)",
    )
    egress: list[str] = Field(
        description="setup.egress: the allow-list HTTP tools were checked against"
    )
    http: list[str] = Field(description="providers.http: the only answers a request could get")
    credentials: list[str] = Field(description="providers given a fixture credential (names only)")
    model: bool = Field(description="a scripted model (providers.model) answered managed turns")
    processes: list[str] = Field(
        default_factory=list,
        description="providers.processes: the process tools the test answered (nothing started);"
        " empty when process tools ran for real, sandboxed",
    )


class CaseReport(_Model):
    """One test's result."""

    id: str = Field(description="package/test")
    file: str
    status: Literal["passed", "failed", "error"]
    duration_s: float
    run_id: str | None = None
    run_status: str | None = None
    outcome: str | None = None
    receipt_id: str | None = None
    failures: list[CaseFailure] = []
    error: CaseError | None = None
    workspace: str | None = Field(default=None, description="kept workspace (--keep)")
    authority: CaseAuthority | None = Field(
        default=None, description="what the test ran under (absent when it could not run)"
    )


class SuiteSummary(_Model):
    """Counts and the total time."""

    total: int
    passed: int
    failed: int
    errors: int
    duration_s: float


class SuiteReport(_Model):
    """A whole ``proctor test`` invocation."""

    schema_: Literal["proctor.test.v1"] = Field(default=TEST_REPORT_SCHEMA, alias="schema")
    summary: SuiteSummary
    tests: list[CaseReport]


def suite_report_schema() -> dict[str, Any]:
    """The JSON Schema of ``proctor.test.v1``."""
    return SuiteReport.model_json_schema(by_alias=True)
