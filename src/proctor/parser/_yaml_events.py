"""The strict YAML subset's loader proper: PyYAML's event stream built into plain values.

:mod:`proctor.parser.yaml_strict` is the public face (what is refused and why, and the parse
cache); this module is imported only when a document is actually parsed.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from proctor.errors import ParseError
from proctor.parser import _yaml_checks as checks
from proctor.parser._yaml_types import MAX_DEPTH, Path, Positions

__all__ = ["parse"]


try:  # libyaml is several times faster; the pure parser gives the same events.
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT10 = re.compile(r"^[-+]?[0-9]+$")
_INT8 = re.compile(r"^0o[0-7]+$")
_INT16 = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_SPECIAL_FLOAT = re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")

# YAML 1.1 as PyYAML resolves it: only used to find scalars the two versions read differently.
_Y11_RESOLVER = yaml.resolver.Resolver()
_Y11_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_Y11_NUMBER_TAGS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
_LINE_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
_PLAIN_STYLES = (None, "")  # libyaml reports a plain scalar's style as "", PyYAML as None


def parse(text: str, *, source: str) -> tuple[Any, Positions]:
    """The value of one strict-subset document and where each value was written
    (:func:`proctor.parser.yaml_strict.load_yaml_with_positions` without its cache).

    Raises:
        ParseError: as :func:`proctor.parser.yaml_strict.load_yaml`.
    """
    builder = _Builder(source, text)
    try:
        checks.check_tokens(text, source, _Loader)
        for event in yaml.parse(text, Loader=_Loader):
            builder.feed(event)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise _error(source, mark, f"invalid YAML: {problem}", "yaml_syntax") from None
    except yaml.YAMLError as exc:
        # Reader errors (control characters) carry a character offset instead of a mark.
        offset = getattr(exc, "position", None)
        message = "invalid YAML: the text holds a character YAML does not allow"
        if not isinstance(offset, int):
            raise ParseError(message, file=source, code="yaml_syntax") from None
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1) + 1
        raise ParseError(
            message, file=source, line=line, column=column, code="yaml_syntax"
        ) from None
    return builder.result, builder.positions


def _error(source: str, mark: Any, message: str, code: str) -> ParseError:
    if mark is None:
        return ParseError(message, file=source, code=code)
    return ParseError(message, file=source, line=mark.line + 1, column=mark.column + 1, code=code)


class _Frame:
    __slots__ = ("container", "flow", "indent", "key", "key_mark", "path", "start")

    def __init__(
        self, container: dict[str, Any] | list[Any], path: Path, event: Any, parent_indent: int
    ) -> None:
        self.container = container
        self.path = path
        self.flow = bool(event.flow_style)
        self.start = event.start_mark
        # A block collection's own column; a flow one keeps its block parent's, for the
        # continuation-line check when it closes.
        self.indent = parent_indent if self.flow else event.start_mark.column
        # For a mapping: the key read and waiting for its value (``None`` between members).
        self.key: str | None = None
        self.key_mark: Any = None


class _Builder:
    """Turns a PyYAML event stream into plain values, refusing what the subset excludes."""

    def __init__(self, source: str, text: str) -> None:
        self.source = source
        self.text = text
        self._lines: list[str] | None = None
        self.stack: list[_Frame] = []
        self.result: Any = None
        self.positions: Positions = {}
        self.documents = 0
        self.done = False

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            # YAML's own line breaks, so indexes agree with the parser's marks.
            self._lines = _LINE_BREAK.split(self.text)
        return self._lines

    def in_block(self) -> bool:
        return not self.stack or not self.stack[-1].flow

    def block_indent(self) -> int:
        return self.stack[-1].indent if self.stack else -1

    def fail(self, event: Any, message: str, code: str) -> ParseError:
        return _error(self.source, event.start_mark, message, code)

    def feed(self, event: Any) -> None:
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                raise self.fail(
                    event, "several documents in one file; keep one", "yaml_multiple_documents"
                )
            if event.version is not None or event.tags:
                raise self.fail(
                    event, "YAML directives (%YAML, %TAG) are refused", "yaml_directive"
                )
            start: Any = event.start_mark
            self.positions[()] = (start.line + 1, start.column + 1)
            return
        if isinstance(event, yaml.AliasEvent):
            raise self.fail(
                event, f"alias *{event.anchor} is refused; repeat the value", "yaml_alias"
            )
        if isinstance(event, yaml.NodeEvent):
            self._node(event)
            return
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            frame = self.stack.pop()
            end: Any = event.end_mark
            if frame.flow and self.in_block() and end.line > frame.start.line:
                checks.check_continuation_indent(
                    self.lines, frame.start, end, frame.indent, self.source
                )
            self._place(frame.container, event, frame_path=frame.path)

    def _node(self, event: Any) -> None:
        if event.anchor is not None:
            raise self.fail(event, f"anchor &{event.anchor} is refused", "yaml_anchor")
        tag = event.tag
        if tag is not None:
            raise self.fail(
                event,
                f"tag {tag} is refused; quote a scalar to make it a string",
                "yaml_tag",
            )
        if isinstance(event, yaml.ScalarEvent):
            value = self._scalar(event)
            if (
                self.stack
                and isinstance(self.stack[-1].container, dict)
                and self.stack[-1].key is None
            ):
                self._key(value, event)
                return
            self._place(value, event, frame_path=None)
            return
        if self.stack and isinstance(self.stack[-1].container, dict) and self.stack[-1].key is None:
            raise self.fail(event, "a mapping or sequence cannot be a key", "yaml_key_type")
        if len(self.stack) >= MAX_DEPTH:
            raise self.fail(event, f"nesting deeper than {MAX_DEPTH} levels", "yaml_too_deep")
        path = self._child_path(event)
        container: dict[str, Any] | list[Any] = (
            {} if isinstance(event, yaml.MappingStartEvent) else []
        )
        self.stack.append(_Frame(container, path, event, self.block_indent()))

    def _child_path(self, event: Any) -> Path:
        """The path of the value starting at ``event``, recording its position."""
        if not self.stack:
            path: Path = ()
            self.positions.setdefault(
                path, (event.start_mark.line + 1, event.start_mark.column + 1)
            )
            return path
        frame = self.stack[-1]
        if isinstance(frame.container, dict):
            assert frame.key is not None
            return (*frame.path, frame.key)
        path = (*frame.path, len(frame.container))
        self.positions[path] = (event.start_mark.line + 1, event.start_mark.column + 1)
        return path

    def _key(self, key: Any, event: Any) -> None:
        frame = self.stack[-1]
        assert isinstance(frame.container, dict)
        if not isinstance(key, str):
            raise self.fail(
                event, f"key {event.value!r} is not a string; quote it", "yaml_key_type"
            )
        if key == "<<":
            raise self.fail(
                event, "merge key << is refused; write the members out", "yaml_merge_key"
            )
        if key in frame.container:
            raise self.fail(event, f"duplicate key {key!r}", "yaml_duplicate_key")
        frame.key = key
        frame.key_mark = event.start_mark
        mark = event.start_mark
        self.positions[(*frame.path, key)] = (mark.line + 1, mark.column + 1)

    def _place(self, value: Any, event: Any, *, frame_path: Path | None) -> None:
        if not self.stack:
            if frame_path is None:
                self._child_path(event)
            self.result = value
            return
        frame = self.stack[-1]
        if isinstance(frame.container, dict):
            assert frame.key is not None
            frame.container[frame.key] = value
            frame.key = None
        else:
            if frame_path is None:
                self._child_path(event)
            frame.container.append(value)

    def _scalar(self, event: Any) -> Any:
        text: str = event.value
        style = event.style
        if style in ("'", '"') and self.in_block() and event.end_mark.line > event.start_mark.line:
            checks.check_continuation_indent(
                self.lines, event.start_mark, event.end_mark, self.block_indent(), self.source
            )
        elif style in ("|", ">"):
            checks.check_block_scalar(self.text, self.lines, event.start_mark, self.source)
        if style not in _PLAIN_STYLES or not event.implicit[0]:
            return text  # quoted or block scalars are always strings
        checks.check_plain(text, event.start_mark, self.source)
        value = _resolve_plain(text)
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(event, f"{text} is not a number JSON can carry", "yaml_number")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            y11 = _yaml11_number(text)
            if y11 is None or type(y11) is not type(value) or y11 != value:
                raise self.fail(
                    event,
                    f"unquoted {text!r} reads differently in YAML 1.1 and 1.2; quote it "
                    "or write the number in plain decimal",
                    "yaml_ambiguous_scalar",
                )
        return value


def _resolve_plain(text: str) -> Any:
    """Resolve an unquoted scalar by the YAML 1.2 core schema."""
    if _NULL.match(text):
        return None
    if text in _BOOL:
        return _BOOL[text]
    if _INT10.match(text):
        return int(text, 10)
    if _INT8.match(text):
        return int(text[2:], 8)
    if _INT16.match(text):
        return int(text[2:], 16)
    if _FLOAT.match(text):
        return float(text)
    if _SPECIAL_FLOAT.match(text):
        return float(text.replace(".", "", 1))
    return text


def _yaml11_number(text: str) -> int | float | None:
    """The number PyYAML's YAML 1.1 rules read from ``text``, or ``None`` for a non-number."""
    # PyYAML's resolver is untyped; it only matches ``text`` against its YAML 1.1 patterns.
    tag = _Y11_RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    node = yaml.ScalarNode(tag, text)
    if node.tag not in _Y11_NUMBER_TAGS:
        return None
    if node.tag == "tag:yaml.org,2002:int":
        return int(_Y11_CONSTRUCTOR.construct_yaml_int(node))
    return float(_Y11_CONSTRUCTOR.construct_yaml_float(node))
