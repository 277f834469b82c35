"""The click group behind ``proctor`` (see :mod:`proctor.cli.main`)."""

from __future__ import annotations

import importlib

import click

from proctor.cli.caches import use_home_caches

__all__ = ["COMMANDS", "cli"]

# name -> (module, attribute, short help). The short help is kept here so that listing the
# commands does not import every command module.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("proctor.cli.run", "run", "Run a skill method under governance."),
    "resume": ("proctor.cli.resume", "resume", "Answer a paused run and drive it on."),
    "authority": ("proctor.cli.authority", "authority", "Save and list authority presets."),
    "credential": ("proctor.cli.credential", "credential", "Store and bind credential profiles."),
    "history": ("proctor.cli.history", "history", "Show recent runs or one run's record."),
    "tool": ("proctor.cli.tool", "tool", "List and inspect native tools."),
    "connector": ("proctor.cli.connector", "connector", "List and inspect connectors."),
    "check": ("proctor.cli.check", "check", "Self-verify this workspace and the install."),
    "audit": ("proctor.cli.audit", "audit", "Inspect and verify the audit log."),
    "key": ("proctor.cli.key", "key", "Show, export or rotate the local signing key."),
    "verify": ("proctor.cli.verify", "verify", "Verify a receipt and its whole tree."),
    "config": ("proctor.cli.config", "config", "Show and change the home's settings."),
    "directives": ("proctor.cli.directives", "directives", "List, catalogue and run directives."),
    "ask": ("proctor.cli.ask", "ask", "Route a request to a directive and run it."),
    "mcp": ("proctor.cli.mcp", "mcp", "Serve skills and paused runs to MCP clients."),
    "skill": ("proctor.cli.skill", "skill", "Inspect a skill: methods, inputs, credentials."),
    "test": ("proctor.cli.test", "proctor_test", "Replay a skill's tests; record one from a run."),
    "pending": ("proctor.cli.pending", "pending", "List the requests runs wait on."),
    "approve": ("proctor.cli.approve", "approve", "Show a waiting request and approve it."),
    "decline": ("proctor.cli.approve", "decline", "Show a waiting request and decline it."),
    "serve": ("proctor.cli.serve", "serve", "Serve the web approval console."),
    "console": ("proctor.cli.console", "console", "Manage the web console's users."),
    "worker": ("proctor.cli.worker", "worker", "Drive submitted runs from the shared run store."),
    "process": ("proctor.cli.process", "process", "List, read and stop long-lived processes."),
    "init": ("proctor.cli.init", "init", "Start a workspace with a first skill and its test."),
    "package": ("proctor.cli.package", "package", "Show the exact package a publish would send."),
    "registry": ("proctor.cli.registry", "registry", "Publish, search, install signed packages."),
}


class LazyGroup(click.Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        use_home_caches()  # a command runs (not a listing of commands)
        module = importlib.import_module(entry[0])
        command = getattr(module, entry[1])
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="proctor", prog_name="proctor")
def cli() -> None:
    """proctor: a governed execution runtime for AI agent skills."""
