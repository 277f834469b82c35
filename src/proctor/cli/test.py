"""``proctor test PATH``: replay a skill's tests; ``proctor test record``: write one from a run.

Exit status of ``proctor test``: 0 every test passed, 5 a test failed or could not run, 2 the
path names no test (usage). ``--json`` prints a ``proctor.test.v1`` report
(:mod:`proctor.contracts.testreport`); ``--junit FILE`` writes JUnit XML beside it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

EXIT_TESTS_FAILED = 5

_HELP = """Replay a skill's tests, each in a workspace of its own.

PATH is a test file (pkg/tests/NAME.yaml), a package (every tests/*.yaml, in name order) or a
folder (every package below it). Nothing reaches the network, a model or a person: HTTP
answers from the test's exchanges, the host's answers and approvals come from the test.

\b
Example:
  proctor test examples/hello-world
  proctor test examples -k notes --junit report.xml

Exit codes: 0 all passed; 5 a test failed or could not run; 2 no test at PATH.
"""


class _TestGroup(click.Group):
    """``proctor test PATH ...`` runs tests; ``proctor test record ...`` records one."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(
            "proctor test", "PATH [-k NAME] [--json] [--junit FILE] [--keep] | record ..."
        )


@click.group("test", cls=_TestGroup, help=_HELP)
def proctor_test() -> None:
    """Replay a skill's tests."""


@proctor_test.command("run", hidden=True, help=_HELP)
@click.argument("path", type=click.Path(path_type=Path))
@click.option("-k", "keyword", metavar="NAME", help="Only tests whose package/name contains NAME.")
@click.option("--json", "as_json", is_flag=True, help="Print a proctor.test.v1 report.")
@click.option(
    "--junit",
    "junit",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write a JUnit XML report to FILE.",
)
@click.option("--keep", is_flag=True, help="Keep each test's workspace (.proctor/test/<id>/).")
def run_tests(
    path: Path, keyword: str | None, as_json: bool, junit: Path | None, keep: bool
) -> None:
    from proctor.testing.report import build_report, junit_xml
    from proctor.testing.runner import collect, run_cases

    cases = collect(path, keyword)
    results = run_cases(cases, keep=keep) if as_json else _run_with_progress(cases, keep)
    report = build_report(results)
    if as_json:
        from proctor.cli.render import dump_json

        dump_json(report)
    else:
        _summary(report)
    if junit is not None:  # after the report, so a path that cannot be written loses nothing
        try:
            junit.write_bytes(junit_xml(report))
        except OSError as exc:
            from proctor.errors import UsageError

            raise UsageError(
                f"--junit: cannot write {str(junit)!r}: {exc.strerror}", code="junit_unwritable"
            ) from None
    if report["summary"]["passed"] != report["summary"]["total"]:
        sys.exit(EXIT_TESTS_FAILED)


def _run_with_progress(cases: list[Any], keep: bool) -> list[Any]:
    from rich.console import Console

    from proctor.cli.paint import markup as escape
    from proctor.testing.report import build_report, render_authority, render_failure
    from proctor.testing.runner import run_cases

    out = Console(highlight=False, emoji=False, soft_wrap=True)
    status = out.status("")
    marks = {"passed": "[green]PASS [/]", "failed": "[red]FAIL [/]", "error": "[red]ERROR[/]"}

    def started(case: Any) -> None:
        status.update(f"running {escape(case.label)}")

    def finished(result: Any) -> None:
        entry = build_report([result])["tests"][0]  # scrubbed of this test's secrets
        out.print(
            f"{marks[entry['status']]} {escape(entry['id'])}  [dim]{entry['duration_s']:.2f}s[/]"
        )
        if entry.get("authority"):
            out.print(f"    [dim]{escape(render_authority(entry['authority']))}[/]")
        for failure in entry["failures"]:
            for line in render_failure(failure):
                out.print("    " + escape(line))
        if entry.get("error"):
            error = entry["error"]
            out.print(f"    {escape(error['message'])} [dim]\\[{escape(error['code'])}][/]")
        if entry.get("workspace"):
            out.print(f"    [dim]kept: {escape(entry['workspace'])}[/]")

    with status:
        return run_cases(cases, keep=keep, on_start=started, on_result=finished)


def _summary(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from proctor.cli.paint import markup as escape

    table = Table(title=None, show_edge=False, pad_edge=False)
    table.add_column("test")
    table.add_column("result")
    table.add_column("time", justify="right")
    colour = {"passed": "green", "failed": "red", "error": "red"}
    for entry in report["tests"]:
        table.add_row(
            escape(entry["id"]),
            f"[{colour[entry['status']]}]{entry['status']}[/]",
            f"{entry['duration_s']:.2f}s",
        )
    out = Console(highlight=False, emoji=False, soft_wrap=True)
    out.print(table)
    s = report["summary"]
    out.print(
        f"{s['passed']} passed, {s['failed']} failed, {s['errors']} errors"
        f" in {s['duration_s']:.2f}s"
    )
    out.print(
        "[dim]each test ran under proctor's shipped policies and what its test file declares;"
        " no package's proctor.toml, guard module or .proctor/ was loaded[/]"
    )


@proctor_test.command("record")
@click.argument("ref", required=False)
@click.option(
    "--from",
    "from_run",
    metavar="RUN_ID",
    help="Write the test from a sealed run that retained its calls ([replay] retain = true).",
)
@click.option(
    "-i",
    "--input",
    "cli_inputs",
    multiple=True,
    metavar="NAME=VALUE",
    help="An input, typed by the method's schema (repeatable).",
)
@click.option("--inputs", "inputs_file", type=click.File("rb"), help="Inputs as one JSON object.")
@click.option(
    "--act",
    "act",
    metavar="JSON",
    help="The act the host states for the run ($run.act), kept as the test's host.act.",
)
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The test file to write (PACKAGE/tests/NAME.yaml).",
)
def record(
    ref: str | None,
    from_run: str | None,
    cli_inputs: tuple[str, ...],
    inputs_file: Any,
    act: str | None,
    out: Path,
) -> None:
    """Run REF#METHOD for real and write a test file from what it saw, or, with --from
    RUN_ID, write it from a run already recorded.

    HTTP goes out through the egress guard and each exchange is kept; you answer approvals,
    questions and agent turns at the terminal. Credential values are replaced by fixture
    placeholders. With --from, nothing runs: the run's retained calls, model answers and
    decisions become the test, checked against its receipts first.

    \b
    Example:
      proctor test record examples/hello-world#greet -i message=hi \\
        --out examples/hello-world/tests/hi.yaml
      proctor test record --from RUN_ID --out skills/fetch/tests/from-run.yaml
    """
    from proctor.errors import UsageError
    from proctor.parser.inputs import MAX_INPUTS_BYTES, check_cli_pairs, parse_inputs_document
    from proctor.testing.record import record_test

    if from_run is not None:
        if ref is not None or cli_inputs or inputs_file is not None or act is not None:
            raise UsageError(
                "--from RUN_ID records an existing run: give no REF or inputs with it",
                code="usage_error",
            )
        from proctor.testing.replay import record_from

        written = record_from(from_run, out, Path.cwd())
        click.echo(f"wrote {written.path} ({written.summary})")
        click.echo(f"replay it: proctor test {written.path}")
        return
    if ref is None:
        raise UsageError("give REF#METHOD to run, or --from RUN_ID", code="usage_error")
    check_cli_pairs(cli_inputs, with_document=inputs_file is not None)
    inputs = None
    if inputs_file is not None:
        inputs = parse_inputs_document(inputs_file.read(MAX_INPUTS_BYTES + 1), source="--inputs")
    stated = None
    if act is not None:
        from proctor.cli.running import read_act

        stated = read_act(act)
    written = record_test(
        ref, inputs=inputs, cli_inputs=list(cli_inputs), out=out, cwd=Path.cwd(), act=stated
    )
    click.echo(f"wrote {written.path} ({written.summary})")
    click.echo(f"replay it: proctor test {written.path}")
