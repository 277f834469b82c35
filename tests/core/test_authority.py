"""Authority: parsing, narrowing never widens, standing approvals and the floor."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proctor.core.authority import (
    EFFECTS_ORDER,
    REACH_ORDER,
    Authority,
    StandingApproval,
    default_authority,
    narrow,
    package_covered,
    parse_authority,
)
from proctor.core.floor import Change, certain_changes, decide
from proctor.errors import UsageError

limits = st.one_of(st.none(), st.integers(1, 1000))
authorities = st.builds(
    Authority,
    effects=st.sampled_from(EFFECTS_ORDER),
    reach=st.sampled_from(REACH_ORDER),
    max_calls=limits,
    max_concurrency=limits,
    max_child_depth=limits,
    max_fanout=limits,
)


def _wider_or_equal(a: Authority, b: Authority) -> bool:
    """True when ``a`` grants at least what ``b`` grants."""

    def lim(x: int | None, y: int | None) -> bool:
        return x is None or (y is not None and x >= y)

    return (
        EFFECTS_ORDER.index(a.effects) >= EFFECTS_ORDER.index(b.effects)
        and REACH_ORDER.index(a.reach) >= REACH_ORDER.index(b.reach)
        and all(
            lim(getattr(a, n), getattr(b, n))
            for n in ("max_calls", "max_concurrency", "max_child_depth", "max_fanout")
        )
    )


@given(
    authorities,
    st.sampled_from([None, *EFFECTS_ORDER]),
    st.sampled_from([None, *REACH_ORDER]),
    limits,
)
def test_narrowing_never_widens(
    host: Authority, effects: str | None, reach: str | None, max_calls: int | None
) -> None:
    got = narrow(host, effects=effects, reach=reach, limits={"max_calls": max_calls})
    assert _wider_or_equal(host, got)
    if effects is not None:
        assert EFFECTS_ORDER.index(got.effects) <= EFFECTS_ORDER.index(effects)


@given(authorities)
def test_a_wider_value_narrows_nothing(host: Authority) -> None:
    got = narrow(host, effects="allow", reach="inputs")
    assert got == host


def test_default_authority_is_allow_workspace_set_by_no_host() -> None:
    doc = Authority().to_json()
    assert (doc["effects"], doc["reach"], doc["set_by"]) == ("allow", "workspace", "default")
    assert default_authority(managed=False) == Authority()


def test_mcp_and_managed_agents_default_to_ask_workspace() -> None:
    doc = default_authority(managed=True).to_json()
    assert (doc["effects"], doc["reach"], doc["set_by"]) == ("ask", "workspace", "default")


def test_a_host_document_fills_what_it_leaves_out_from_the_surfaces_default() -> None:
    # reach: inputs only when a host grants it
    assert parse_authority({"effects": "ask"}).reach == "workspace"
    assert parse_authority({}).effects == "allow"
    managed = default_authority(managed=True)
    stated = parse_authority({"max_calls": 5}, base=managed)
    assert (stated.effects, stated.reach, stated.max_calls, stated.set_by) == (
        "ask", "workspace", 5, "host"
    )  # fmt: skip
    wider = parse_authority({"effects": "allow", "reach": "inputs"}, base=managed)
    assert (wider.effects, wider.reach) == ("allow", "inputs")


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"effects": "maybe"},
        {"reach": "everywhere"},
        {"max_calls": 0},
        {"max_calls": "5"},
        {"max_calls": True},
        {"unknown": 1},
        {"standing_approvals": [{"edits": {"paths": ["../up"]}}]},
        {"standing_approvals": [{"commands": {"argv_prefix": []}}]},
        {"standing_approvals": [{"local": False}]},
        {"standing_approvals": [{"edits": {"paths": ["a"]}, "local": True}]},
        {"standing_approvals": [{"purchases": {}}]},
    ],
)
def test_invalid_authorities_are_refused(doc: object) -> None:
    with pytest.raises(UsageError) as refused:
        parse_authority(doc)
    assert refused.value.code == "authority_invalid"


def test_standing_edits_cover_whole_components_only() -> None:
    entry = StandingApproval("edits", paths=("notes",))
    assert entry.covers_paths(["notes/a.md", "notes"])
    assert not entry.covers_paths(["notes-old/a.md"])
    assert not entry.covers_paths(["notes/a.md", "src/b.py"])
    assert StandingApproval("edits", paths=("",)).covers_paths(["anything/at/all"])


def test_standing_commands_need_the_exact_prefix() -> None:
    entry = StandingApproval("commands", argv_prefix=("git", "status"))
    assert entry.covers_argv(["git", "status", "--short"])
    assert not entry.covers_argv(["git", "push"])
    assert not entry.covers_argv(["git"])


def test_floor_decisions() -> None:
    write = Change("fs.write", "write", ("notes/a.md",))
    run = Change("command.execute", "process", (), ("make", "test"))
    net = Change("http.request", "network")
    read = Change("fs.read", "read")
    ask = parse_authority({"effects": "ask"})
    assert decide(ask, read).verdict == "admit"
    assert decide(ask, write).verdict == "pause"
    assert decide(ask, write, approved=True).verdict == "admit"
    assert decide(parse_authority({"effects": "none"}), write, approved=True).verdict == "refuse"
    assert decide(parse_authority({}), write).verdict == "admit"
    local = parse_authority({"effects": "ask", "standing_approvals": [{"local": True}]})
    assert decide(local, write).standing_index == 0
    assert decide(local, run).verdict == "admit"
    assert decide(local, net).verdict == "pause"  # network is not local
    edits = parse_authority({"effects": "ask", "standing_approvals": [{"edits": {"paths": ["x"]}}]})
    assert decide(edits, write).verdict == "pause"
    assert decide(edits, run).verdict == "pause"


def test_certain_changes_names_each_step() -> None:
    steps = [
        ("read", "fs.read", "read"),
        ("write", "fs.write", "write"),
        ("go", "command.execute", "process"),
    ]
    assert certain_changes(steps) == ["write (fs.write)", "go (command.execute)"]


# -- packages ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patterns", "identity", "covered"),
    [
        (["acme/*"], "registry:acme/summ", True),
        (["acme/summ"], "registry:acme/summ", True),
        (["registry:acme/*"], "registry:acme/summ", True),
        (["acme/*"], "registry:evil/summ", False),
        (["*/summ"], "registry:evil/summ", True),
        (["acme/*"], "local:acme/summ", False),  # a folder named like a publisher is local
        (["core:*"], "core:weather", True),
        (["core:weather"], "core:weather", True),
        (["core:*"], "local:skills/weather", False),  # a folder named like a core skill
        (["local:*"], "local:skills/deep/pkg", True),  # a last * covers the rest
        (["local:skills/*"], "local:skills/pkg", True),
        (["local:skills/*"], "local:other/pkg", False),
        (["local:skills/pkg"], "local:skills/pkg/sub", False),
        (["local:*/pkg"], "local:skills/pkg", True),
        (["local:*/pkg"], "local:a/b/pkg", False),  # an inner * is one segment
        ([], "core:weather", False),
        (["core:*"], "", False),
        (["core:*"], "weather", False),
    ],
)
def test_package_patterns_cover_by_identity(
    patterns: list[str], identity: str, covered: bool
) -> None:
    assert package_covered(patterns, identity) is covered


def test_packages_are_recorded_only_when_stated_and_kept_by_narrowing() -> None:
    assert "packages" not in parse_authority({}).to_json()
    stated = parse_authority({"packages": ["acme/*", "local:*"]})
    assert stated.to_json()["packages"] == ["acme/*", "local:*"]
    assert narrow(stated, effects="none").packages == ("acme/*", "local:*")
    assert parse_authority(stated.to_json(), recorded=True) == stated


@pytest.mark.parametrize(
    "bad",
    ["acme/*", None, [1], ["acme"], ["a/b/c"], ["local:../x"], ["core:"], ["ftp:x"], ["a//b"]],
)
def test_malformed_packages_are_refused(bad: object) -> None:
    with pytest.raises(UsageError) as err:
        parse_authority({"packages": bad})
    assert err.value.code == "authority_invalid"


@given(st.lists(st.text(max_size=20), max_size=4), st.text(max_size=30))
def test_package_patterns_never_raise_but_refuse_with_a_code(
    patterns: list[str], identity: str
) -> None:
    try:
        parsed = parse_authority({"packages": patterns})
    except UsageError as exc:
        assert exc.code == "authority_invalid"
        return
    assert parsed.packages is not None
    package_covered(parsed.packages, identity)
