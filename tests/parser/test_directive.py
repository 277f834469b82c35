"""The directive format: read exactly as the reference kernel writes it; refused when unclear."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.errors import ParseError
from proctor.parser.directive import CATEGORIES, parse_directive

GOOD = """---
id: file_analysis
description: Analyze files and summarize contents
tools: [list_dir, read_file]
category: task
---

# File analysis

## Steps
1. Discover.
"""


def parse(text: str, stem: str = "file_analysis") -> object:
    return parse_directive(text, file_stem=stem, source=f"directives/{stem}.md")


def test_a_reference_shaped_directive_reads_exactly() -> None:
    d = parse_directive(GOOD, file_stem="file_analysis", source="directives/file_analysis.md")
    assert d.id == "file_analysis"
    assert d.description == "Analyze files and summarize contents"
    assert d.tools == ("list_dir", "read_file")
    assert d.category == "task"
    assert d.body.startswith("# File analysis")
    assert d.to_dict()["source"] == "directives/file_analysis.md"


def test_crlf_bom_category_case_and_defaults_read_as_the_reference_reads_them() -> None:
    text = "\ufeff---\r\ndescription: d\r\ncategory: ' Security '\r\n---\r\nbody\r\n"
    d = parse_directive(text, file_stem="x", source="x.md")
    assert (d.id, d.category, d.tools) == ("x", "security", ())
    d2 = parse_directive("---\nid: y\ndescription: d\n---\nbody", file_stem="y", source="y.md")
    assert d2.category == "task"
    d3 = parse_directive(
        "---\nid: z\ndescription: d\ntools: [echo, echo]\n---\nb", file_stem="z", source="z.md"
    )
    assert d3.tools == ("echo",)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("# no frontmatter\n", "directive_frontmatter"),
        ("---\nid: x\ndescription: d\n", "directive_frontmatter"),  # never closed
        ("---\nid: x\ndescription: [oops\n---\nb", "directive_frontmatter"),
        ("---\n- a list\n---\nb", "directive_frontmatter"),
        ("---\nid: x\ndescription: d\ntool: [echo]\n---\nb", "directive_frontmatter"),
        ("---\nid: x\ndescription: d\nanchor: &a 1\nother: *a\n---\nb", "directive_frontmatter"),
        ("---\nid: x\ndescription: d\ndescription: e\n---\nb", "directive_frontmatter"),
        ("---\nid: other\ndescription: d\n---\nb", "directive_id_mismatch"),
        ("---\nid: ../x\ndescription: d\n---\nb", "directive_id_invalid"),
        ("---\nid: x\n---\nb", "directive_description_missing"),
        ("---\nid: x\ndescription: '  '\n---\nb", "directive_description_missing"),
        ("---\nid: x\ndescription: d\ncategory: admin\n---\nb", "directive_category_unknown"),
        ("---\nid: x\ndescription: d\ncategory: 3\n---\nb", "directive_category_unknown"),
        ("---\nid: x\ndescription: d\ntools: echo\n---\nb", "directive_tools_invalid"),
        ("---\nid: x\ndescription: d\ntools: [1]\n---\nb", "directive_tools_invalid"),
        ("---\nid: x\ndescription: d\ntools: ['a b']\n---\nb", "directive_tools_invalid"),
        ("---\nid: x\ndescription: d\n---\n   \n", "directive_body_empty"),
    ],
)
def test_each_unclear_directive_is_refused_by_name(text: str, code: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_directive(text, file_stem="x", source="directives/x.md")
    assert caught.value.code == code
    assert caught.value.message.startswith("directives/x.md")


def test_an_unknown_category_is_named_but_a_long_value_is_not_echoed() -> None:
    long = "z" * 500
    with pytest.raises(ParseError) as caught:
        parse(f"---\nid: x\ndescription: d\ncategory: {long}\n---\nb", "x")
    assert long not in caught.value.message


# Plain YAML scalars that read as something other than text are excluded (they are written
# unquoted below, as directive authors write tool names).
_KEYWORDS = {"null", "true", "false", "yes", "no", "on", "off", "y", "n", "nan", "inf"}
ident = st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True).filter(lambda s: s not in _KEYWORDS)


@given(
    directive_id=ident,
    description=st.text(
        alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=60
    ).filter(lambda s: s.strip()),
    tools=st.lists(ident, max_size=5, unique=True),
    category=st.sampled_from(CATEGORIES),
)
def test_any_well_formed_directive_reads_back_what_was_written(
    directive_id: str, description: str, tools: list[str], category: str
) -> None:
    import json

    text = (
        f"---\nid: {directive_id}\ndescription: {json.dumps(description)}\n"
        f"tools: [{', '.join(tools)}]\ncategory: {category}\n---\n# Body\n"
    )
    d = parse_directive(text, file_stem=directive_id, source="d.md")
    assert (d.id, d.description, list(d.tools), d.category) == (
        directive_id,
        description.strip(),
        tools,
        category,
    )
