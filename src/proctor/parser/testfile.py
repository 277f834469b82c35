"""Skill test files (``tests/<name>.yaml``) from text, read by the strict YAML loader.

Pure: the runner reads the file and passes its text with a relative label. A field the model
does not know, a missing one or a value of the wrong shape is refused with the
``file:line:column`` where it was written, never with its value (a test file may hold fixture
credentials).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from proctor.contracts.testfile import SkillTest
from proctor.errors import Message, ParseError, Quoted
from proctor.parser.skill import format_path
from proctor.parser.yaml_strict import Path, Positions, load_yaml_with_positions

__all__ = ["parse_test_file"]

# Which pydantic error a person should read first when several describe one mistake (a
# union reports one error per member): a misspelt field, then a missing one, then the rest.
_PREFERENCE = {"extra_forbidden": 0, "missing": 1}


def parse_test_file(text: str, source: str) -> SkillTest:
    """Read one test file into a :class:`~proctor.contracts.testfile.SkillTest`.

    Raises:
        ParseError: YAML refused by the strict loader (its ``yaml_*`` codes);
            ``test_not_mapping``; ``test_unknown_field``, ``test_missing_field`` or
            ``test_invalid`` naming the field's path (``expect.steps.read.outcome``) and its
            ``file:line:column``.
    """
    data, positions = load_yaml_with_positions(text, source=source)
    if not isinstance(data, dict):
        raise ParseError(
            "a test file is a mapping (method, inputs, setup, host, providers, expect)",
            file=source,
            line=1,
            column=1,
            code="test_not_mapping",
        )
    try:
        return SkillTest.model_validate(data)
    except ValidationError as exc:
        raise _translate(exc, data, source, positions) from None


_MAY_QUOTE = frozenset({"value_error", "assertion_error"})


def _translate(
    exc: ValidationError, data: dict[str, Any], source: str, positions: Positions
) -> ParseError:
    errors = exc.errors(include_input=False, include_url=False)
    # Among equally preferred errors, the one reaching deepest into the document is the
    # member of a union the author meant.
    ranked = [
        (_PREFERENCE.get(str(e["type"]), 2), -len(path), i, path, str(e["type"]), str(e["msg"]))
        for i, e in enumerate(errors)
        for path in [_document_path(data, tuple(e["loc"]), missing=e["type"] == "missing")]
    ]
    _, _, _, path, kind, msg = min(ranked)
    where = format_path(path)
    message: str | Message
    if kind == "extra_forbidden":
        message, code = f"unknown field {where}", "test_unknown_field"
    elif kind == "missing":
        message, code = f"missing field {where}", "test_missing_field"
    else:
        detail = msg.removeprefix("Value error, ")
        # pydantic's own messages never hold the value (include_input=False); our
        # validators' may quote one (a turn's address), so theirs stay data.
        said = Quoted(detail) if kind in _MAY_QUOTE else detail
        message, code = Message(Quoted(where), ": ", said), "test_invalid"
    line, column = _position(positions, path)
    return ParseError(
        message, file=source, line=line, column=column, code=code, details={"path": where}
    )


def _document_path(data: Any, loc: tuple[int | str, ...], *, missing: bool) -> Path:
    """The part of pydantic's location the document has: union member names are dropped."""
    out: list[str | int] = []
    current = data
    for index, part in enumerate(loc):
        if part == "json_":
            part = "json"
        in_map = isinstance(current, dict) and isinstance(part, str) and part in current
        in_list = isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        if in_map or in_list:
            current = current[part]
            out.append(part)
        elif missing and index == len(loc) - 1 and isinstance(part, str):
            out.append(part)  # a missing field: named, though the document lacks it
    return tuple(out)


def _position(positions: Positions, path: Path) -> tuple[int | None, int | None]:
    for cut in range(len(path), -1, -1):
        found = positions.get(path[:cut])
        if found is not None:
            return found
    return None, None
