"""The table of ``proctor``'s commands, without click: the group reads it to load a command
on first use, and ``proctor --help`` is written from it (:mod:`proctor.cli.top_help`)."""

from __future__ import annotations

__all__ = ["COMMANDS", "SUMMARY"]

#: What ``proctor --help`` says the program is.
SUMMARY = "proctor: a governed execution runtime for AI agent skills."

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
    "store": ("proctor.cli.store", "store", "Start the run store over, on purpose."),
    "key": ("proctor.cli.key", "key", "Show, export or rotate the local signing key."),
    "verify": ("proctor.cli.verify", "verify", "Verify a receipt and its whole tree."),
    "witness": ("proctor.cli.witness", "witness", "Keep countersigned copies of seals."),
    "export": (
        "proctor.cli.export",
        "export",
        "Export a sealed run as a signed in-toto statement.",
    ),
    "config": ("proctor.cli.config", "config", "Show and change the home's settings."),
    "directives": ("proctor.cli.directives", "directives", "List, catalogue and run directives."),
    "ask": ("proctor.cli.ask", "ask", "Route a request to a directive and run it."),
    "mcp": ("proctor.cli.mcp", "mcp", "Serve skills and paused runs to MCP clients."),
    "skill": ("proctor.cli.skill", "skill", "Inspect a skill: methods, inputs, credentials."),
    "test": ("proctor.cli.test", "proctor_test", "Replay a skill's tests; record one from a run."),
    "replay": (
        "proctor.cli.replay",
        "replay",
        "Re-run a recorded run offline and show where it diverges.",
    ),
    "pending": ("proctor.cli.pending", "pending", "List the requests runs wait on."),
    "approve": ("proctor.cli.approve", "approve", "Show a waiting request and approve it."),
    "decline": ("proctor.cli.approve", "decline", "Show a waiting request and decline it."),
    "notify": ("proctor.cli.notify", "notify", "List, test and send approval notifications."),
    "serve": ("proctor.cli.serve", "serve", "Serve the web approval console."),
    "console": ("proctor.cli.console", "console", "Manage the web console's users."),
    "worker": ("proctor.cli.worker", "worker", "Drive submitted runs from the shared run store."),
    "process": ("proctor.cli.process", "process", "List, read and stop long-lived processes."),
    "init": ("proctor.cli.init", "init", "Start a workspace with a first skill and its test."),
    "package": ("proctor.cli.package", "package", "Show the exact package a publish would send."),
    "registry": ("proctor.cli.registry", "registry", "Publish, search, install signed packages."),
    "trust": ("proctor.cli.trust", "trust", "Review and trust this workspace's guard modules."),
}
