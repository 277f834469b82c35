"""Agent Skills packages: a folder with only ``SKILL.md`` is a skill with one agent method.

The published format's frontmatter (``name``, ``description``, optional ``license``,
``compatibility``, ``metadata``, ``allowed-tools``) becomes a profile with one method,
``main``: one agent turn whose instructions are the body, whose input is the ``task``, and
whose allowance maps ``allowed-tools`` onto proctor tools by :data:`ALLOWED_TOOLS`:

=================  ==================  ==================================================
allowed-tools      proctor tool        notes
=================  ==================  ==================================================
``Read``           ``fs.read``         also always offered: the body's ``scripts/`` and
                                       ``references/`` are readable by the turn
``Write``          ``fs.write``
``Edit``           ``fs.edit``
``MultiEdit``      ``fs.edit``
``Grep``           ``fs.search``
``Glob``, ``LS``   ``fs.list``
``WebFetch``       ``http.request``
``Bash(P:*)``      ``command.execute`` only commands whose argv starts with ``P``'s words
``Bash(P *)``      ``command.execute`` the same (the newer spelling)
``Bash(C)``        ``command.execute`` only exactly the command ``C``
``Bash``           ``command.execute`` any command
=================  ==================  ==================================================

Every other name (``WebSearch``, ``Task``, ``mcp__...``) is listed in :attr:`ToolMapping.unknown`
and offered nothing. The package grants itself no approval: a command it may run is still a
change the run's authority admits, asks a person about, or refuses.
"""

from __future__ import annotations

import re
from typing import Any

from proctor.contracts.skill import RunProfile
from proctor.contracts.values import dataclass
from proctor.errors import ParseError

__all__ = ["ALLOWED_TOOLS", "ToolMapping", "agent_skill_profile", "map_allowed_tools"]

ALLOWED_TOOLS: dict[str, str] = {
    "Read": "fs.read",
    "Write": "fs.write",
    "Edit": "fs.edit",
    "MultiEdit": "fs.edit",
    "Grep": "fs.search",
    "Glob": "fs.list",
    "LS": "fs.list",
    "WebFetch": "http.request",
    "Bash": "command.execute",
}
"""An Agent Skills tool name and the proctor tool it maps to."""

_ENTRY = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)(?:\(([^()]*)\))?")
_MAX_ENTRIES = 64


@dataclass(frozen=True)
class ToolMapping:
    """What a package's ``allowed-tools`` became.

    Attributes:
        tools: the proctor tools offered to the turn, sorted.
        commands: the commands ``command.execute`` may run, each ``(words, exact)``; ``None``
            means any command (a bare ``Bash``), an empty tuple none.
        unknown: the names that map to nothing, as written.
    """

    tools: tuple[str, ...]
    commands: tuple[tuple[tuple[str, ...], bool], ...] | None
    unknown: tuple[str, ...]

    def allows_argv(self, argv: Any) -> bool:
        """Whether ``command.execute`` may run ``argv`` under this mapping."""
        if self.commands is None:
            return True
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return False
        for words, exact in self.commands:
            if tuple(argv) == words or (not exact and tuple(argv[: len(words)]) == words):
                return True
        return False

    def to_json(self) -> dict[str, Any]:
        """As ``proctor skill show`` and the docs print it."""
        return {
            "tools": list(self.tools),
            "commands": None
            if self.commands is None
            else [{"argv_prefix": list(w), "exact": e} for w, e in self.commands],
            "unknown": list(self.unknown),
        }


def _entries(value: Any, source: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        text = " ".join(value)
    elif isinstance(value, str):
        text = value
    else:
        raise ParseError(
            "allowed-tools is a space-separated text or a list of tool names",
            file=source,
            code="skill_md_field",
        )
    out: list[str] = []
    position = 0
    while position < len(text):
        if text[position] in " ,\t\n":
            position += 1
            continue
        match = _ENTRY.match(text, position)
        if match is None:
            raise ParseError(
                f"allowed-tools has an entry that is not NAME or NAME(...) at character"
                f" {position + 1}",
                file=source,
                code="skill_md_field",
            )
        out.append(match.group(0))
        position = match.end()
        if len(out) > _MAX_ENTRIES:
            raise ParseError(
                f"allowed-tools lists more than {_MAX_ENTRIES} entries",
                file=source,
                code="skill_md_field",
            )
    return out


def map_allowed_tools(value: Any, source: str = "SKILL.md") -> ToolMapping:
    """Map an ``allowed-tools`` value onto proctor tools (see the module's table).

    Raises:
        ParseError: ``skill_md_field`` when the value is neither text nor a list of text, or
            holds an entry that is not ``NAME`` or ``NAME(...)``.
    """
    tools = {"fs.read"}  # the package's own files are readable by the turn
    commands: list[tuple[tuple[str, ...], bool]] | None = []
    unknown: list[str] = []
    for entry in _entries(value, source):
        match = _ENTRY.fullmatch(entry)
        assert match is not None
        name, argument = match.group(1), match.group(2)
        tool = ALLOWED_TOOLS.get(name)
        if tool is None or (argument is not None and name != "Bash"):
            if tool is None:
                unknown.append(entry)
            else:
                tools.add(tool)  # Read(path) and the like: the tool, held to containment
            continue
        tools.add(tool)
        if name != "Bash":
            continue
        if argument is None or argument.strip() in ("", "*"):
            commands = None
        elif commands is not None:
            commands.append(_command(argument))
    return ToolMapping(
        tuple(sorted(tools)),
        None if commands is None else tuple(commands),
        tuple(unknown),
    )


def _command(argument: str) -> tuple[tuple[str, ...], bool]:
    text = argument.strip()
    if text.endswith(":*"):
        return tuple(text[:-2].split()), False
    if text.endswith(" *") or text == "*":
        return tuple(text[:-1].split()), False
    return tuple(text.split()), True


def agent_skill_profile(
    frontmatter: dict[str, Any], source: str = "SKILL.md"
) -> tuple[RunProfile, ToolMapping]:
    """The one-method profile of a package with only ``SKILL.md``, and its tool mapping.

    The method ``main`` takes ``task`` (text) and runs one agent turn (instructions: the body,
    which the driver puts before every turn of the package) that returns a JSON object.

    Raises:
        ParseError: ``skill_md_field`` for an ``allowed-tools`` that cannot be read.
    """
    mapping = map_allowed_tools(frontmatter.get("allowed-tools"), source)
    description = str(frontmatter.get("description") or "").strip()
    profile = RunProfile.model_validate(
        {
            "minimum_proctor": "0.1.0",
            "methods": {
                "main": {
                    "description": description or "the skill's instructions",
                    "inputs": {
                        "type": "object",
                        "properties": {"task": {"type": "string", "minLength": 1}},
                        "required": ["task"],
                        "additionalProperties": False,
                    },
                    "steps": [
                        {
                            "id": "work",
                            "agent": {
                                "instructions": "Do the task in your inputs by following the"
                                " skill's instructions above.",
                                "inputs": {"task": "$input.task"},
                                "calls": {"tools": list(mapping.tools)},
                                "output": {"type": "object"},
                            },
                        }
                    ],
                }
            },
        }
    )
    return profile, mapping
