"""References in step inputs: ``$input...``, ``$steps...`` and ``$run.act``.

Syntax (a whole string value, nothing around it)::

    $input.NAME[.SEG...]          a method input, then nested fields
    $steps.ID[.SEG...]            a step's output (whole), then nested fields
    $run.act[.SEG...]             the act the host stated for the run (``null`` when it stated
                                  none), then nested fields
    $item[.SEG...]                in a fan-out step's inputs: the element (then nested fields)
    $index                        in a fan-out step's inputs: the element's position (from 0)

Segments are separated by ``.``; ``/`` is accepted as the same separator so the JSON-pointer
form ``$steps.x.items/0/name`` reads like ``$steps.x.items.0.name``. A segment of digits
indexes a list (or names that key of a mapping). In a segment, ``~0`` is ``~``, ``~1`` is
``/`` and ``~2`` is ``.``, for keys holding those characters.

A whole-string reference keeps the referenced value's type (a number stays a number, an
object an object). There is no interpolation: a string that embeds a reference in other text
(``"Summary: $steps.count.stdout"``) is refused when the profile loads
(``reference_embedded``), pointing to the native ``text.format`` tool, which builds text from a
template and named values; any other ``$`` inside a string (``"costs $5"``) is plain text. A
string starting with ``$`` must be a valid reference or start with ``$$``, which
stands for a literal string starting with one ``$`` (``$$5`` is ``"$5"``); anything else, such
as ``$inputs.x`` or ``$env.X``, is refused when the profile loads, so a typo never becomes a
literal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from proctor.contracts.values import dataclass
from proctor.errors import ProctorError

__all__ = ["RUN_FIELDS", "Ref", "collect_refs", "parse_ref_string", "resolve"]

RUN_FIELDS = ("act",)
"""What ``$run.`` names: ``act``, the act the host stated for the run."""

_SEGMENT = r"(?:[^./~$\s]|~[012])+"
_REF = re.compile(
    rf"^\$(?P<root>input|steps|run)(?P<path>(?:[./]{_SEGMENT})+)$",
)
_EACH = re.compile(rf"^\$(?:(?P<item>item)(?P<path>(?:[./]{_SEGMENT})*)|index)$")
_SPLIT = re.compile(r"[./]")
_EMBEDDED = re.compile(r"\$(?P<ref>(?:input|steps|run)[./][^\s\"'`,;)\]}]*)")
_ROOTS: dict[str, Literal["input", "steps", "run"]] = {
    "input": "input",
    "steps": "steps",
    "run": "run",
}
_UNESCAPE = {"~0": "~", "~1": "/", "~2": "."}


@dataclass(frozen=True, slots=True)
class Ref:
    """A parsed reference.

    ``root`` is ``"input"`` (``name`` = the input), ``"steps"`` (``name`` = the step id),
    ``"run"`` (``name`` = ``act``, the host's stated act), or ``"item"``/``"index"`` (a
    fan-out's element and its position; ``name`` is the root);
    ``path`` are the nested segments after it; ``text`` is the reference as written.
    """

    root: Literal["input", "steps", "run", "item", "index"]
    name: str
    path: tuple[str, ...]
    text: str


def parse_ref_string(value: str) -> Ref | str | None:
    """Read one string value.

    Returns a :class:`Ref` for a reference, the literal string for a ``$$`` escape, and
    ``None`` for a string that is not special (no leading ``$``).

    Raises:
        ProctorError: ``invalid_reference`` for a string starting with a single ``$`` that is
            not a valid reference; the message names it.
    """
    if not value.startswith("$"):
        return None
    if value.startswith("$$"):
        return value[1:]
    each = _EACH.match(value)
    if each is not None:
        if each["item"] is None:
            return Ref(root="index", name="index", path=(), text=value)
        parts = tuple(_unescape(p) for p in _SPLIT.split(each["path"])[1:])
        return Ref(root="item", name="item", path=parts, text=value)
    match = _REF.match(value)
    if match is None:
        raise ProctorError(
            f"{value!r} is not a reference: write $input.NAME or $steps.ID.FIELD, "
            "or start a literal with $$",
            code="invalid_reference",
        )
    segments = tuple(_unescape(part) for part in _SPLIT.split(match["path"])[1:])
    root = _ROOTS[match["root"]]
    if root == "run" and segments[0] not in RUN_FIELDS:
        raise ProctorError(
            f"{value!r} is not a reference: a run names only {', '.join(RUN_FIELDS)}"
            " ($run.act, the act the host stated)",
            code="invalid_reference",
        )
    return Ref(root=root, name=segments[0], path=segments[1:], text=value)


def _unescape(segment: str) -> str:
    return re.sub(r"~[012]", lambda m: _UNESCAPE[m.group(0)], segment)


def collect_refs(value: Any) -> list[Ref]:
    """Every reference inside ``value`` (strings in nested lists and mapping values).

    Mapping keys are never references.

    Raises:
        ProctorError: ``invalid_reference`` for a malformed ``$`` string;
            ``reference_embedded`` for a reference inside other text.
    """
    found: list[Ref] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            _refuse_embedded(item)
            parsed = parse_ref_string(item)
            if isinstance(parsed, Ref):
                found.append(parsed)
        elif isinstance(item, dict):
            pending.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            pending.extend(reversed(item))
    return found


def _refuse_embedded(value: str) -> None:
    """Refuse a string that embeds a reference in other text (never interpolated)."""
    if value.startswith("$"):
        return  # a whole reference, a $$ literal, or refused by parse_ref_string
    match = _EMBEDDED.search(value)
    if match is None:
        return
    ref = "$" + match["ref"]
    raise ProctorError(
        f"{ref} is inside other text ({value[:60]!r}): a reference is a whole string and is"
        " never interpolated. To build text from values use the text.format tool, e.g."
        " {tool: text.format, inputs: {template: 'Summary: {count}', values: {count: "
        f"{ref}}}}}}}",
        code="reference_embedded",
    )


def resolve(
    value: Any,
    inputs: dict[str, Any],
    steps: dict[str, Any],
    each: tuple[Any, int] | None = None,
    run: Mapping[str, Any] | None = None,
) -> Any:
    """A copy of ``value`` with every reference replaced by what it names.

    ``inputs`` are the method's inputs; ``steps`` maps step ids to their outputs; ``each`` is
    a fan-out child's ``(element, index)`` that ``$item`` and ``$index`` name; ``run`` holds
    what ``$run.`` names (``{"act": ...}``; without it a ``$run`` reference is unresolved). ``$$``
    escapes become their literal strings.

    Raises:
        ProctorError: ``unresolved_reference`` naming the reference when it points at nothing
            (an absent input, a step with no output yet, a missing field or index);
            ``invalid_reference`` for a malformed ``$`` string. Values are never echoed.
    """
    if isinstance(value, str):
        parsed = parse_ref_string(value)
        if parsed is None:
            return value
        if isinstance(parsed, str):
            return parsed
        return _lookup(parsed, inputs, steps, each, run)
    if isinstance(value, dict):
        return {key: resolve(item, inputs, steps, each, run) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, inputs, steps, each, run) for item in value]
    return value


def _lookup(
    ref: Ref,
    inputs: dict[str, Any],
    steps: dict[str, Any],
    each: tuple[Any, int] | None,
    run: Mapping[str, Any] | None,
) -> Any:
    if ref.root in ("item", "index"):
        if each is None:
            raise ProctorError(
                f"{ref.text} names a fan-out element, and this is not a for_each step",
                code="unresolved_reference",
                details={"reference": ref.text},
            )
        source: Mapping[str, Any] = {"item": each[0], "index": each[1]}
    elif ref.root == "run":
        source = run if run is not None else {}
    else:
        source = inputs if ref.root == "input" else steps
    if ref.name not in source:
        what = {"input": "input", "run": "run field"}.get(ref.root, "step output")
        raise ProctorError(
            f"{ref.text} names no {what} {ref.name!r}",
            code="unresolved_reference",
            details={"reference": ref.text},
        )
    current = source[ref.name]
    for depth, segment in enumerate(ref.path):
        current = _child(current, segment)
        if current is _MISSING:
            where = ".".join((ref.name, *ref.path[: depth + 1]))
            raise ProctorError(
                f"{ref.text} points at nothing: {where} does not exist",
                code="unresolved_reference",
                details={"reference": ref.text},
            )
    return current


_MISSING = object()


def _child(container: Any, segment: str) -> Any:
    if isinstance(container, dict):
        return container.get(segment, _MISSING)
    if isinstance(container, list) and segment.isdigit() and segment.isascii():
        if segment != "0" and segment.startswith("0"):
            return _MISSING
        index = int(segment)
        return container[index] if index < len(container) else _MISSING
    return _MISSING
