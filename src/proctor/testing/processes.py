"""``providers.processes``: a test's answers to local process tools, matched on tool and
arguments (the runx reference's stand-ins for process tools).

When a test declares any entry, every call of a tool whose effect is ``process``
(``command.execute``, ``process.*``, ``worker.run``) is answered here and no process is started:
a call whose tool and arguments (compared as canonical JSON) match an entry gets that entry's
result; any other call is refused ``process_fixture_unmatched``. Admission runs first as in any
run (scope, schema, containment, policy, the floor with the exact argv, credential delivery),
and the tool's own result checks after (:mod:`proctor.runtime.engine.stand_ins`). Without
entries, process tools run for real, sandboxed. Two entries with the same tool and arguments are
refused when the test is read (``test_exchange_invalid``); an entry no call used fails the test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from proctor.errors import RefusedCall
from proctor.testing.oracle import MISSING, Failure
from proctor.testing.tool_answers import ToolAnswers

if TYPE_CHECKING:
    from proctor.contracts.testfile import ProcessExchange

__all__ = ["ProcessFixtures"]


class ProcessFixtures(ToolAnswers):
    """The declared process results, with how often each was used and what matched none."""

    def __init__(self, exchanges: Sequence[ProcessExchange], source: str) -> None:
        entries = ((e.tool, e.arguments, dict(e.result)) for e in exchanges)
        super().__init__(entries, source, "providers.processes")

    @property
    def active(self) -> bool:
        """Whether the test stands in for process tools at all (it declared an entry)."""
        return bool(self.declared)

    def answer(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The result of the entry matching this call.

        Raises:
            RefusedCall: ``process_fixture_unmatched``: no entry matches; nothing is started.
        """
        result = self.take(tool, arguments)
        if result is not None:
            return result
        raise RefusedCall(
            f"no providers.processes entry of this test matches {tool} with these arguments; "
            "a test that declares process results never starts a process",
            code="process_fixture_unmatched",
        )

    def failures(self) -> list[Failure]:
        """An entry no call used, and each call no entry matched, as test failures."""
        out = []
        for index, count in enumerate(self.counts):
            if count == 0:
                out.append(
                    Failure(
                        "processes",
                        f"providers.processes[{index}] ({self.declared[index][0]}) was never "
                        "called",
                        f"/providers/processes/{index}",
                    )
                )
        for call in self.unmatched:
            out.append(
                Failure(
                    "processes",
                    f"a {call['tool']} call matched no providers.processes entry; it was refused",
                    None,
                    MISSING,
                    call,
                )
            )
        return out
