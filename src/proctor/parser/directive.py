"""Directive files: the reference Python kernel's format, read exactly and refused when unclear.

A directive is a Markdown file ``<id>.md``::

    ---
    id: file_analysis
    description: Analyze files and summarize contents
    tools: [list_dir, read_file]
    category: task
    ---
    # File analysis
    ...body: the instructions an agent follows...

The frontmatter sits between a first line ``---`` and the next line ``---``. Its fields:

- ``id``: letters, digits, ``_``, ``.`` and ``-``; it must equal the file name without ``.md``
  (absent, it is the file name, as the reference reads it);
- ``description``: one non-empty line, used for routing and the catalogue; required;
- ``tools``: the tool names the directive may call; absent or empty grants none;
- ``category``: ``system``, ``task``, ``security`` or ``debug`` (case and surrounding blanks
  ignored, as the reference reads it); absent means ``task``.

Where the reference kernel quietly falls back (a frontmatter it cannot read becomes an empty
directive, an unknown category becomes ``task``), proctor refuses the file by name: a directive
is an authority document, and a typo in it must not change what it grants. Other frontmatter
keys are refused too: ``tool:`` for ``tools:`` would otherwise grant nothing without a word.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from proctor.contracts.values import dataclass
from proctor.errors import ParseError
from proctor.parser.yaml_strict import load_yaml

__all__ = ["CATEGORIES", "DIRECTIVE_ID", "Directive", "parse_directive"]

Category = Literal["system", "task", "security", "debug"]
CATEGORIES: tuple[Category, ...] = ("system", "task", "security", "debug")
DIRECTIVE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
"""What a directive id may be: no separators, so an id can never name a path elsewhere."""

_FRONTMATTER = re.compile(r"^---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|$)", re.DOTALL)
_FIELDS = frozenset({"id", "description", "tools", "category"})
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class Directive:
    """A parsed directive; valid by construction.

    Attributes:
        id: the directive id (equal to its file name without ``.md``).
        description: its one-line description.
        tools: the tool names its frontmatter lists, in order, without duplicates.
        category: one of :data:`CATEGORIES`.
        body: the Markdown after the frontmatter (leading blank lines removed).
        source: the label it was read from (a relative path or ``shipped:<name>``).
    """

    id: str
    description: str
    tools: tuple[str, ...]
    category: Category
    body: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        """The directive's metadata as JSON (no body)."""
        return {
            "id": self.id,
            "description": self.description,
            "tools": list(self.tools),
            "category": self.category,
            "source": self.source,
        }


def _refuse(source: str, message: str, code: str) -> ParseError:
    return ParseError(message, file=source, code=code)


def parse_directive(text: str, *, file_stem: str, source: str) -> Directive:
    """Read one directive file.

    Args:
        text: the file's text.
        file_stem: the file name without ``.md``; the id must equal it.
        source: a label for messages (relative path), never a host path.

    Raises:
        ParseError: ``directive_frontmatter`` (no frontmatter, unparsable YAML, not a mapping,
            an unknown key, a field of the wrong type), ``directive_id_invalid``,
            ``directive_id_mismatch``, ``directive_description_missing``,
            ``directive_category_unknown``, ``directive_tools_invalid``,
            ``directive_body_empty``.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    match = _FRONTMATTER.match(text)
    if match is None:
        raise _refuse(
            source,
            "directive must start with a --- frontmatter block holding id, description, tools"
            " and category, closed by a --- line",
            "directive_frontmatter",
        )
    try:
        data = load_yaml(match.group(1), source=source)
    except ParseError as exc:
        raise _refuse(
            source,
            f"directive frontmatter is not readable YAML: {exc.message}",
            "directive_frontmatter",
        ) from exc
    if not isinstance(data, dict):
        raise _refuse(source, "directive frontmatter must be a mapping", "directive_frontmatter")
    unknown = sorted(str(k) for k in data if k not in _FIELDS)
    if unknown:
        raise _refuse(
            source,
            f"directive frontmatter has unknown key(s) {', '.join(unknown)}; "
            "expected id, description, tools, category",
            "directive_frontmatter",
        )
    directive_id = _id(data, file_stem, source)
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise _refuse(
            source,
            f"directive {directive_id!r} has no description (a non-empty text is required)",
            "directive_description_missing",
        )
    category = _category(data, directive_id, source)
    tools = _tools(data, directive_id, source)
    body = text[match.end() :].lstrip()
    if not body.strip():
        raise _refuse(
            source, f"directive {directive_id!r} has an empty body", "directive_body_empty"
        )
    return Directive(
        id=directive_id,
        description=description.strip(),
        tools=tools,
        category=category,
        body=body,
        source=source,
    )


def _id(data: dict[str, Any], file_stem: str, source: str) -> str:
    raw = data.get("id", file_stem)
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str) or not DIRECTIVE_ID.match(raw):
        raise _refuse(
            source,
            "directive id must be letters, digits, '_', '.' or '-'",
            "directive_id_invalid",
        )
    if raw != file_stem:
        raise _refuse(
            source,
            f"directive id {raw!r} disagrees with its file name {file_stem + '.md'!r}",
            "directive_id_mismatch",
        )
    return raw


def _category(data: dict[str, Any], directive_id: str, source: str) -> Category:
    raw = data.get("category", "task")
    value = raw.strip().lower() if isinstance(raw, str) else raw
    for category in CATEGORIES:
        if value == category:
            return category
    shown = raw if isinstance(raw, str) and len(raw) <= 40 else type(raw).__name__
    raise _refuse(
        source,
        f"directive {directive_id!r} has unknown category {shown!r}; expected one of "
        + ", ".join(CATEGORIES),
        "directive_category_unknown",
    )


def _tools(data: dict[str, Any], directive_id: str, source: str) -> tuple[str, ...]:
    raw = data.get("tools")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _refuse(
            source,
            f"directive {directive_id!r}: tools must be a list of tool names",
            "directive_tools_invalid",
        )
    seen: dict[str, None] = {}
    for item in raw:
        if not isinstance(item, str) or not _TOOL_NAME.match(item):
            raise _refuse(
                source,
                f"directive {directive_id!r}: every entry of tools must be a tool name",
                "directive_tools_invalid",
            )
        seen.setdefault(item, None)
    return tuple(seen)
