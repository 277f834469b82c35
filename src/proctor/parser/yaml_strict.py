"""A strict YAML subset: plain JSON-like data, nothing that hides or rewires it.

proctor reads documents that grant or describe authority (``run.yaml``, policy files, test
files), so what a reader sees must be exactly what proctor loads. The loader works on PyYAML's
event stream (libyaml's C parser when installed, else the pure one) and builds values itself,
refusing every construct that makes a document mean something other than it shows:

============================  =====================================================
code                          refused
============================  =====================================================
``yaml_syntax``               text that is not YAML at all
``yaml_directive``            ``%YAML`` / ``%TAG`` directives
``yaml_multiple_documents``   more than one document in the text
``yaml_anchor``               ``&anchor``
``yaml_alias``                ``*alias``
``yaml_merge_key``            a ``<<`` key (quoted or not)
``yaml_tag``                  every explicit tag, ``!!str`` and ``!`` included: quote a
                              scalar to make it a string instead
``yaml_duplicate_key``        a key repeated in one mapping, at any depth
``yaml_key_type``             a key that is not a string (``1:``, ``true:``, ``[a]:``, ``~:``)
``yaml_ambiguous_scalar``     an unquoted scalar that YAML 1.1 and YAML 1.2 read as
                              different values (``09``, ``010``, ``1e3``, ``0o17``)
``yaml_number``               a number JSON cannot carry (``.inf``, ``.nan``)
``yaml_too_deep``             nesting deeper than :data:`MAX_DEPTH`
============================  =====================================================

Unquoted scalars follow the YAML 1.2 core schema, the JSON-compatible one: ``null ~ Null``
and an empty value are ``None``; ``true false`` (and their ``True``/``TRUE`` spellings) are
booleans; decimal, ``0x`` and ``0o`` integers; decimal floats. Everything else is a string, so
``yes``, ``no``, ``on``, ``off``, dates and times (``2024-01-31``), sexagesimal ``12:30`` and
``1_000`` load as the strings they look like: no timestamps, binary or sets ever come out.
Where YAML 1.1 (which PyYAML and many other tools speak) would read an unquoted scalar as a
*different* number or as a string while 1.2 reads a number, the document is ambiguous between
tools and is refused; quote the scalar or write the number plainly.

Values are ``dict`` (string keys), ``list``, ``str``, ``int``, ``float``, ``bool`` or ``None``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from pathlib import Path as _FsPath
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "Path",
    "Positions",
    "load_yaml",
    "load_yaml_with_positions",
    "use_parse_cache",
]

from proctor.parser._yaml_types import MAX_DEPTH, Path, Positions

_CACHE_FORMAT = 1
_CACHE_LIMIT = 2048  # entries kept; past it the older half is removed at the next write
_folder: list[_FsPath] = []  # the folder in use, when one is


def use_parse_cache(folder: _FsPath | None) -> None:
    """Keep parsed documents in ``folder`` (``None``: keep none), by the digest of their text.

    A process that starts, parses its few documents and exits (the CLI) spends more on
    importing and running the YAML parser than on its run: with the cache, a document parsed
    once is read back as JSON. An entry is named by the SHA-256 of the text and of the loader
    (this module's parser and its checks, PyYAML's own files), so an edited document, or a
    changed parser, is parsed again; only documents that load are kept, so every refusal is
    raised by the parser itself, each time. The folder must sit where runs cannot write (the
    CLI uses the home's ``cache/yaml``). It and its parent are created when missing, never
    the folder above them: a home that does not exist yet is not created by the cache.
    """
    _folder[:] = [] if folder is None else [folder]


def load_yaml(text: str, *, source: str) -> Any:
    """Load one strict-subset YAML document from ``text``.

    ``source`` labels the text in messages (a relative path, never a host path). An empty
    document loads as ``None``.

    Raises:
        ParseError: the text is not YAML or uses a refused construct; the message starts
            ``source:line:column:`` and the ``code`` is one of the module's table.
    """
    return load_yaml_with_positions(text, source=source)[0]


def load_yaml_with_positions(text: str, *, source: str) -> tuple[Any, Positions]:
    """Like :func:`load_yaml`, also returning where each value was written.

    The positions let a later validation error name ``source:line:column`` of the field it
    is about. The root value sits at path ``()``.

    Raises:
        ParseError: as :func:`load_yaml`.
    """
    from_cache = _cached_as(_folder[0], text) if _folder else None
    if from_cache is not None:
        found = _read_entry(from_cache)
        if found is not None:
            return found
    from proctor.parser._yaml_events import parse

    value, positions = parse(text, source=source)
    if from_cache is not None:
        _write_entry(from_cache, value, positions)
    return value, positions


def _cached_as(folder: _FsPath, text: str) -> _FsPath | None:
    """The entry ``text`` is kept as in ``folder``; None when the loader's own files cannot
    be read to name it (the document is then parsed, and not kept)."""
    try:
        return folder / (_entry_name(text) + ".json")
    except OSError:
        return None


@functools.cache
def _loader_digest() -> str:
    """What the parse depends on besides the text: this parser's files, PyYAML's, Python's
    (read once per process)."""
    import importlib.util

    here = _FsPath(__file__).parent
    digest = hashlib.sha256(f"{_CACHE_FORMAT}|{sys.version_info[:2]}".encode())
    for name in ("yaml_strict.py", "_yaml_types.py", "_yaml_events.py", "_yaml_checks.py"):
        digest.update((here / name).read_bytes())
    spec = importlib.util.find_spec("yaml")
    origin = None if spec is None else spec.origin
    if origin is not None:
        stat = os.stat(origin)
        digest.update(f"|{origin}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def _entry_name(text: str) -> str:
    digest = hashlib.sha256(_loader_digest().encode())
    digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _read_entry(entry: _FsPath) -> tuple[Any, Positions] | None:
    """The cached value and positions, or ``None`` (absent, unreadable or not an entry)."""
    try:
        raw = entry.read_bytes()
    except OSError:
        return None
    try:
        kept = json.loads(raw)
        if not (isinstance(kept, list) and len(kept) == 3 and kept[0] == _CACHE_FORMAT):
            return None
        positions: Positions = {
            tuple(path): (int(line), int(column)) for path, line, column in kept[2]
        }
    except (ValueError, TypeError):
        return None
    return kept[1], positions


def _write_entry(entry: _FsPath, value: Any, positions: Positions) -> None:
    """Keep a parsed document (atomically, owner-only); a failure only loses the entry."""
    folder = entry.parent
    try:
        if not folder.is_dir():
            if not folder.parent.parent.is_dir():
                return  # no home yet: the cache never creates one
            folder.mkdir(parents=True, mode=0o700, exist_ok=True)
        body = json.dumps(
            [_CACHE_FORMAT, value, [[list(p), lc[0], lc[1]] for p, lc in positions.items()]],
            ensure_ascii=False,
            allow_nan=False,
        ).encode("utf-8", "surrogatepass")
        temporary = folder / f".{entry.name}.{os.getpid()}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, body)
        finally:
            os.close(fd)
        os.replace(temporary, entry)
        _prune(folder)
    except (OSError, ValueError):
        return


def _prune(folder: _FsPath) -> None:
    """Past :data:`_CACHE_LIMIT` entries, remove the older half (by modification time)."""
    names = os.listdir(folder)
    if len(names) <= _CACHE_LIMIT:
        return
    dated = []
    for name in names:
        try:
            dated.append((os.stat(folder / name).st_mtime_ns, name))
        except OSError:
            continue
    dated.sort()
    for _, name in dated[: len(dated) // 2]:
        try:
            os.unlink(folder / name)
        except OSError:
            continue
