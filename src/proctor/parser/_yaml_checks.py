"""Checks for invalid YAML that libyaml and PyYAML accept anyway.

Both parsers are lenient in a few places the YAML 1.2 spec (and other tools) are not: a
comment glued to a token, a flow collection or quoted scalar whose continuation lines are not
indented under their key, plain ``-`` scalars, odd block scalar whitespace. A document another
tool reads differently is exactly what a strict loader must not accept, so these are refused
as ``yaml_syntax``. The yaml-test-suite corpus pins each of them.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from proctor.errors import ParseError

__all__ = ["check_block_scalar", "check_continuation_indent", "check_plain", "check_tokens"]

_SPACE = " \t\r\n"
# Only texts with one of these shapes can hold what the token pass refuses; most never do.
_TOKEN_SUSPECT = re.compile(r"[\]},\"'>|]#|\?[^\s]")
_BLOCK_HEADER = re.compile(r"[|>]([1-9][+-]?|[+-][1-9]?)?")
_INDICATOR_PLAIN = re.compile(r"^[-?:](?:\s|$)")


def _fail(source: str, index_mark: Any, message: str) -> ParseError:
    return ParseError(
        message,
        file=source,
        line=index_mark.line + 1,
        column=index_mark.column + 1,
        code="yaml_syntax",
    )


def check_tokens(text: str, source: str, loader: Any) -> None:
    """Refuse a comment with no space before ``#`` after a token, and a glued ``?`` key.

    Raises:
        ParseError: ``yaml_syntax`` at the offending token.
    """
    if not _TOKEN_SUSPECT.search(text):
        return
    glued = (
        yaml.FlowEntryToken,
        yaml.FlowSequenceEndToken,
        yaml.FlowMappingEndToken,
    )
    for token in yaml.scan(text, Loader=loader):
        end = token.end_mark
        after = text[end.index : end.index + 1]
        quoted = isinstance(token, yaml.ScalarToken) and token.style in ("'", '"')
        if (isinstance(token, glued) or quoted) and after == "#":
            raise _fail(source, end, "invalid YAML: a comment needs a space before #")
        glued_key = after and after not in _SPACE
        if isinstance(token, yaml.KeyToken) and end.index > token.start_mark.index and glued_key:
            raise _fail(source, end, "invalid YAML: ? must be followed by a space")


def check_plain(text: str, mark: Any, source: str) -> None:
    """Refuse a plain scalar that starts with an indicator (``-``, ``?``, ``:``) and a space.

    Raises:
        ParseError: ``yaml_syntax``.
    """
    if _INDICATOR_PLAIN.match(text):
        raise _fail(source, mark, f"invalid YAML: {text[0]!r} cannot start an unquoted value")


def check_continuation_indent(
    lines: list[str], start: Any, end: Any, parent_indent: int, source: str
) -> None:
    """Refuse continuation lines of a flow collection or quoted scalar not indented under
    their block parent (tabs never count as indentation).

    Raises:
        ParseError: ``yaml_syntax`` at the first badly indented line.
    """
    for number in range(start.line + 1, min(end.line, len(lines) - 1) + 1):
        line = lines[number]
        if not line.strip(_SPACE):
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent <= parent_indent:
            raise ParseError(
                "invalid YAML: a continued value's lines must be indented more than its key "
                "(with spaces)",
                file=source,
                line=number + 1,
                column=indent + 1,
                code="yaml_syntax",
            )


def check_block_scalar(text: str, lines: list[str], start: Any, source: str) -> None:
    """Refuse block scalar shapes libyaml reads differently from the spec.

    A header glued to a comment (``>#``), leading blank lines more indented than the first
    content line when the indentation is auto-detected, and a whitespace-only last line with
    no final newline.

    Raises:
        ParseError: ``yaml_syntax``.
    """
    header = _BLOCK_HEADER.match(text, start.index)
    if header is None:
        return
    after = text[header.end() : header.end() + 1]
    if after and after not in _SPACE:
        raise _fail(source, start, "invalid YAML: a block scalar header needs a space before #")
    explicit = any(ch.isdigit() for ch in header.group(0))
    if not explicit:
        widest_blank = 0
        for line in lines[start.line + 1 :]:
            stripped = line.rstrip("\r")
            if stripped.strip(" "):
                content_indent = len(stripped) - len(stripped.lstrip(" "))
                if widest_blank > content_indent:
                    raise _fail(
                        source,
                        start,
                        "invalid YAML: a block scalar's leading blank lines are indented "
                        "more than its first line",
                    )
                break
            widest_blank = max(widest_blank, len(stripped))
    last = lines[-1]
    if last and not last.strip(" \t\r") and not text.endswith("\n"):
        raise _fail(
            source,
            start,
            "invalid YAML: the text ends with a line of spaces after a block scalar; "
            "end it with a newline",
        )
