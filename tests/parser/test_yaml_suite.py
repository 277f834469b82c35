"""The yaml-test-suite corpus against the strict loader.

Every case the suite marks invalid, and every case using anchors, aliases, tags or several
documents, is refused. Every other case either loads to exactly its ``in.json`` or is refused
(the subset is allowed to be stricter, never to read something differently).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from proctor.errors import ParseError
from proctor.parser.yaml_strict import load_yaml
from tests.corpora import corpus_dir

_PROPS = re.compile(r"^[+=](?:MAP|SEQ|VAL)(?: \{\}| \[\])?((?: &\S*)?(?: <[^>]*>)?)")


def _cases(data: Path) -> list[Path]:
    cases: list[Path] = []
    for folder in sorted(data.iterdir()):
        subs = sorted(p for p in folder.iterdir() if p.is_dir())
        cases.extend(subs or [folder])
    return cases


def _must_refuse(case: Path) -> bool:
    if (case / "error").exists():
        return True
    events = (case / "test.event").read_text(encoding="utf-8").splitlines()
    if sum(line.startswith("+DOC") for line in events) > 1:
        return True
    for line in events:
        if line.startswith("=ALI"):
            return True
        props = _PROPS.match(line)
        if props and props.group(1):
            return True
    return False


def _documents(text: str) -> list[object]:
    decoder = json.JSONDecoder()
    docs, index, text = [], 0, text.strip()
    while index < len(text):
        value, index = decoder.raw_decode(text, index)
        docs.append(value)
        while index < len(text) and text[index].isspace():
            index += 1
    return docs


def test_yaml_test_suite() -> None:
    data = corpus_dir("yaml-test-suite") / "data"
    cases = _cases(data)
    assert len(cases) > 300
    accepted_bad, differing = [], []
    equal = refused = 0
    for case in cases:
        text = (case / "in.yaml").read_bytes().decode("utf-8")
        try:
            value = load_yaml(text, source="in.yaml")
        except ParseError as error:
            assert str(error).startswith("in.yaml"), error
            refused += 1
            continue
        name = str(case.relative_to(data))
        if _must_refuse(case):
            accepted_bad.append(name)
            continue
        if (case / "in.json").exists():
            expected = _documents((case / "in.json").read_text(encoding="utf-8"))
            if value != (expected[0] if expected else None):
                differing.append(name)
            else:
                equal += 1
    assert accepted_bad == []
    assert differing == []
    assert equal > 150 and refused > 150
