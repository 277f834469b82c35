"""Skill packages from text: ``SKILL.md``, ``run.yaml``, references and method choice.

Everything here is pure: the runtime reads the files and passes their text with a relative
label for messages. A package is a folder with ``SKILL.md`` (frontmatter ``name`` and
``description``, the body for an agent) and optionally ``run.yaml``; a lone markdown file is
not a package.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from proctor._version import __version__
from proctor.contracts.skill import (
    STEP_TAGS,
    Method,
    ProcessStep,
    RunProfile,
    SkillPackage,
    WaitStep,
)
from proctor.contracts.strict import StrictError
from proctor.errors import Message, ParseError, ProctorError, Quoted, UsageError
from proctor.parser.refs import Ref, collect_refs, parse_ref_string
from proctor.parser.runx import (
    RunxRefusal,
    apply_runners,
    declare_read_inputs,
    refuse_module_tools,
)
from proctor.parser.schemas import schema_problem
from proctor.parser.waits import literal_until
from proctor.parser.yaml_strict import Path, Positions, load_yaml_with_positions

PRICED_TOOLS = ("http.request",)
"""The tools whose calls a step's ``cost:`` may price."""

__all__ = [
    "build_package",
    "format_path",
    "package_dir_for",
    "parse_ref",
    "parse_run_yaml",
    "parse_skill_md",
    "select_method",
]

_VERSION = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")
_FRONTMATTER_OPEN = "---"
_METHOD_NAME = re.compile(r"^[a-z0-9_-]+$")


def parse_skill_md(text: str, source: str) -> tuple[dict[str, Any], str]:
    """Split ``SKILL.md`` into its frontmatter mapping and its body.

    The frontmatter sits between a first line ``---`` and the next line ``---`` and is read
    with the strict YAML loader; it must hold non-empty string ``name`` and ``description``.
    Other frontmatter fields are kept as they are.

    Raises:
        ParseError: no frontmatter (``skill_md_frontmatter``), YAML refused by the strict
            loader, or ``name``/``description`` missing or not text (``skill_md_field``).
    """
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[0].lstrip("\ufeff").rstrip() != _FRONTMATTER_OPEN:
        raise ParseError(
            "SKILL.md must start with a --- frontmatter block holding name and description",
            file=source,
            line=1,
            column=1,
            code="skill_md_frontmatter",
        )
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() == _FRONTMATTER_OPEN), None)
    if end is None:
        raise ParseError(
            "SKILL.md frontmatter is not closed by a --- line",
            file=source,
            line=1,
            column=1,
            code="skill_md_frontmatter",
        )
    # A leading newline keeps the loader's line numbers equal to the file's.
    data, positions = load_yaml_with_positions("\n" + "\n".join(lines[1:end]), source=source)
    if not isinstance(data, dict):
        raise ParseError(
            "SKILL.md frontmatter must be a mapping with name and description",
            file=source,
            line=2,
            column=1,
            code="skill_md_frontmatter",
        )
    for field in ("name", "description"):
        value = data.get(field)
        if not isinstance(value, str) or not value.strip():
            line, column = positions.get((field,), (1, 1))
            raise ParseError(
                f"SKILL.md frontmatter needs a non-empty text {field!r}",
                file=source,
                line=line,
                column=column,
                code="skill_md_field",
            )
    body = "\n".join(lines[end + 1 :])
    return data, body


def _version_tuple(text: str) -> tuple[int, int, int] | None:
    match = _VERSION.match(text)
    if match is None:
        return None
    return int(match[1]), int(match[2]), int(match[3])


def parse_run_yaml(
    text: str, source: str, *, proctor_version: str = __version__, check_schemas: bool = True
) -> RunProfile:
    """Read ``run.yaml`` into a :class:`RunProfile`.

    ``minimum_proctor`` is read before anything else is validated, so a profile written for
    a newer proctor is refused by that name rather than by a field this version lacks.

    ``check_schemas=False`` leaves out the draft-07 check of the declared schemas, and only
    that: it is for text whose digest a run record holds (the text passed the check when the
    run started; :func:`proctor.parser.schemas.compile_schema` checks a schema again whenever
    it is compiled for use).

    Raises:
        ParseError: YAML refused by the strict loader; ``run_yaml_not_mapping``;
            ``minimum_proctor_missing`` / ``minimum_proctor_invalid``; ``proctor_too_old``
            when it names a newer version; ``run_yaml_unknown_field``,
            ``run_yaml_missing_field`` and ``run_yaml_invalid`` naming the field's path
            (``methods.greet.steps[0].tool``) and position; ``method_description_missing``;
            ``default_method_unknown``; ``step_id_duplicate``; ``invalid_reference``;
            ``reference_embedded``; ``reference_unknown_input``; ``reference_unknown_step``;
            ``result_from_unknown``;
            ``reference_outside_for_each`` (``$item``/``$index`` outside a fan-out's inputs);
            ``for_each_invalid`` (a ``for_each`` that is not one reference); ``cost_invalid``
            (``cost:`` on a step whose tool is not priced, or not ``per: call``);
            ``credential_unknown``; ``schema_invalid`` for a method's ``inputs`` or
            ``outputs``, or an agent step's ``output``, that is not a draft-07 JSON Schema
            (``properties:`` left empty, ``required: name``), naming where in it;
            ``process_tool_cwd_invalid`` (a process tool's ``cwd`` leaving its package);
            ``reference_unknown_output`` (``$steps.ID.FIELD`` where step ``ID``'s
            ``result_as`` names another output: its whole result is that one output);
            ``wait_until_invalid`` (a literal ``until`` that is no time); and the runx
            fields of :mod:`proctor.parser.runx` (``runner_type_unsupported``,
            ``runner_method_missing``, ``runner_default_conflict``,
            ``process_tool_module_unsupported``).
    """
    data, positions = load_yaml_with_positions(text, source=source)
    if not isinstance(data, dict):
        raise _at(source, positions, (), "run.yaml must be a mapping", "run_yaml_not_mapping")
    _check_minimum(data, source, positions, proctor_version)
    try:
        refuse_module_tools(data)
        try:
            profile = RunProfile.model_validate(data)
        except StrictError as exc:
            raise _translate(exc, source, positions) from None
        profile = apply_runners(profile)
        if profile.minimum_runx is not None:  # the reference's reading of undeclared inputs
            profile = declare_read_inputs(profile, _reference_fields)
    except RunxRefusal as refused:
        raise _at(source, positions, refused.path, refused.message, refused.code) from None
    _check_profile(profile, source, positions, check_schemas)
    return profile


RUNX_FORMAT = (0, 12)
"""The runx reference's package format this proctor reads (``minimum_runx`` up to 0.12.x)."""


def _check_minimum(
    data: dict[str, Any], source: str, positions: Positions, proctor_version: str
) -> None:
    """``minimum_proctor``, or (a package written for the runx reference) ``minimum_runx``:
    exactly one, read before anything else, so a package needing a newer runtime is refused
    by name."""
    given = [key for key in ("minimum_proctor", "minimum_runx") if key in data]
    if not given:
        raise _at(
            source,
            positions,
            (),
            "run.yaml needs minimum_proctor (the oldest proctor version it runs on), or"
            " minimum_runx for a package written for runx",
            "minimum_proctor_missing",
        )
    if len(given) > 1:
        raise _at(
            source,
            positions,
            ("minimum_runx",),
            "give minimum_proctor or minimum_runx, not both",
            "minimum_proctor_invalid",
        )
    key = given[0]
    wanted = data[key]
    wanted_tuple = _version_tuple(wanted) if isinstance(wanted, str) else None
    if wanted_tuple is None:
        raise _at(
            source,
            positions,
            (key,),
            f"{key} must be a version like 0.1.0 (quote it if YAML reads a number)",
            "minimum_proctor_invalid",
        )
    if key == "minimum_runx":
        if wanted_tuple[:2] > RUNX_FORMAT:
            raise _at(
                source,
                positions,
                (key,),
                f"requires runx >= {wanted}; proctor reads packages written for runx up to"
                f" {RUNX_FORMAT[0]}.{RUNX_FORMAT[1]}.x",
                "runx_too_new",
            )
        return
    running = _version_tuple(proctor_version)
    if running is None or wanted_tuple > running:
        raise _at(
            source,
            positions,
            (key,),
            f"requires proctor >= {wanted}; this is {proctor_version}",
            "proctor_too_old",
        )


def format_path(path: Path) -> str:
    """A YAML path as people read it: ``methods.greet.steps[0].tool``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "(top level)"


def _at(
    source: str, positions: Positions, path: Path, message: str | Message, code: str
) -> ParseError:
    line, column = _position(positions, path)
    return ParseError(
        message,
        file=source,
        line=line,
        column=column,
        code=code,
        details={"path": format_path(path)},
    )


def _position(positions: Positions, path: Path) -> tuple[int | None, int | None]:
    for cut in range(len(path), -1, -1):
        found = positions.get(path[:cut])
        if found is not None:
            return found
    return None, None


def _data_path(loc: tuple[int | str, ...]) -> Path:
    # The checker puts the step's kind after methods.NAME.steps.N; the document has no such key.
    parts = list(loc)
    if (
        len(parts) > 5
        and parts[0] == "methods"
        and parts[2] == "steps"
        and isinstance(parts[3], int)
        and parts[4] in STEP_TAGS
    ):
        del parts[4]
    return tuple(parts)


def _translate(exc: StrictError, source: str, positions: Positions) -> ParseError:
    """A record's refusal as a ParseError naming the YAML path (never a value)."""
    path = _data_path(exc.loc)
    where = format_path(path)
    if exc.kind == "extra_forbidden":
        return _at(source, positions, path, f"unknown field {where}", "run_yaml_unknown_field")
    if exc.kind == "missing":
        return _at(source, positions, path, f"missing field {where}", "run_yaml_missing_field")
    return _at(source, positions, path, invalid_at(where, exc), "run_yaml_invalid")


def invalid_at(where: str, exc: StrictError) -> Message:
    """``<path>: <what is wrong>``: the path is the document's (quoted), the rest proctor's own
    words when the strict checker wrote them (they never hold the value), so a path ending in
    a secret-named field (``credentials``) is not read as the assignment of a secret. A
    record's own check's message stays quoted data (it could name a value)."""
    said = Quoted(exc.message) if exc.from_validator else exc.message
    return Message(Quoted(where), ": ", said)


def _check_profile(
    profile: RunProfile, source: str, positions: Positions, check_schemas: bool = True
) -> None:
    methods = profile.methods
    if profile.default_method is not None and profile.default_method not in methods:
        raise _at(
            source,
            positions,
            ("default_method",),
            f"default_method {profile.default_method!r} is not a method; "
            f"methods: {', '.join(sorted(methods))}",
            "default_method_unknown",
        )
    _check_environment(profile, source, positions)
    for name, method in methods.items():
        base: Path = ("methods", name)
        if len(methods) > 1 and method.description is None:
            raise _at(
                source,
                positions,
                base,
                f"method {name!r} needs a description: a skill with several methods "
                "tells them apart by it",
                "method_description_missing",
            )
        _check_method(method, base, profile, source, positions, check_schemas)


def _check_environment(profile: RunProfile, source: str, positions: Positions) -> None:
    """The declared ``environment`` names are non-secret settings a process is given: never a
    proctor setting (``PROCTOR_*``: a database URL, a key path) and never a name a declared
    credential is delivered under (a secret goes only through ``credentials``)."""
    delivered = {
        auth.delivery.env
        for requirement in profile.credentials.values()
        for auth in requirement.auth.values()
    }
    for part in ("required", "optional"):
        for index, name in enumerate(getattr(profile.environment, part)):
            at: Path = ("environment", part, index)
            if name.upper().startswith("PROCTOR_"):
                raise _at(
                    source,
                    positions,
                    at,
                    f"environment names {name}, a proctor setting; a package is never given"
                    " proctor's own settings",
                    "environment_reserved",
                )
            if name in delivered:
                raise _at(
                    source,
                    positions,
                    at,
                    f"environment names {name}, which a credential is delivered under; a"
                    " secret reaches a step only through its credential:",
                    "environment_is_credential",
                )


def _check_schema(schema: Any, at: Path, source: str, positions: Positions) -> None:
    """Refuse a declared schema here, where it is written, not when a run first validates."""
    try:  # checked once, and compiled when it passes (a run then finds it compiled)
        problem = schema_problem(schema, compile=True)
    except ParseError as exc:
        raise _at(source, positions, at, exc.message, "schema_invalid") from None
    if problem is not None:
        inside, rule = problem
        where = format_path(inside) if inside else "it"
        raise _at(
            source,
            positions,
            (*at, *inside),
            f"{format_path(at)} is not a valid JSON Schema: {where} {rule}",
            "schema_invalid",
        )


def _check_method(
    method: Method,
    base: Path,
    profile: RunProfile,
    source: str,
    positions: Positions,
    check_schemas: bool = True,
) -> None:
    if check_schemas:
        _check_schema(method.inputs, (*base, "inputs"), source, positions)
    if check_schemas and method.outputs is not None:
        _check_schema(method.outputs, (*base, "outputs"), source, positions)
    properties = method.inputs.get("properties")
    declared = set(properties) if isinstance(properties, dict) else None
    seen: set[str] = set()
    result_as: dict[str, str] = {}
    for index, step in enumerate(method.steps):
        at: Path = (*base, "steps", index)
        if step.id in seen:
            raise _at(
                source,
                positions,
                (*at, "id"),
                f"step id {step.id!r} is used twice",
                "step_id_duplicate",
            )
        for field, value in _reference_fields(step):
            try:
                refs = collect_refs(value)
            except ProctorError as exc:
                raise _at(source, positions, (*at, *field), exc.message, exc.code) from None
            fan_out = field == ("inputs",) and getattr(step, "for_each", None) is not None
            for ref in refs:
                _check_ref(ref, declared, seen, (*at, *field), source, positions, fan_out)
                _check_output_ref(ref, result_as, (*at, *field), source, positions)
        _check_step_kind(step, at, source, positions)
        cost = getattr(step, "cost", None)
        if cost is not None and (
            getattr(step, "tool", None) not in PRICED_TOOLS
            or cost.per not in ("call", "request", "success")
        ):
            raise _at(
                source,
                positions,
                (*at, "cost"),
                "cost prices a call of "
                + ", ".join(PRICED_TOOLS)
                + " (per: call, request or success)",
                "cost_invalid",
            )
        for_each = getattr(step, "for_each", None)
        if for_each is not None and not _list_reference(for_each):
            raise _at(
                source,
                positions,
                (*at, "for_each"),
                "for_each must be one reference to a list: $input.NAME or $steps.ID.FIELD",
                "for_each_invalid",
            )
        agent = getattr(step, "agent", None)
        if check_schemas and agent is not None and agent.output is not None:
            _check_schema(agent.output, (*at, "agent", "output"), source, positions)
        credential = getattr(step, "credential", None)
        if credential is not None and credential not in profile.credentials:
            raise _at(
                source,
                positions,
                (*at, "credential"),
                f"credential {credential!r} is not declared under credentials",
                "credential_unknown",
            )
        seen.add(step.id)
        if step.result_as is not None:
            result_as[step.id] = step.result_as
    for index, producer in enumerate(method.result_from or []):
        if producer not in seen:
            raise _at(
                source,
                positions,
                (*base, "result_from", index),
                f"result_from names {producer!r}, which is not a step of this method",
                "result_from_unknown",
            )


def _check_output_ref(
    ref: Ref, result_as: dict[str, str], at: Path, source: str, positions: Positions
) -> None:
    """A read of a ``result_as`` step names that one output (or the step's whole output)."""
    named = result_as.get(ref.name) if ref.root == "steps" else None
    if named is None or not ref.path or ref.path[0] == named:
        return
    raise _at(
        source,
        positions,
        at,
        f"{ref.text} reads {ref.path[0]!r} of step {ref.name!r}, whose whole result is its"
        f" output {named!r} (result_as); read $steps.{ref.name}.{named}",
        "reference_unknown_output",
    )


def _check_step_kind(step: Any, at: Path, source: str, positions: Positions) -> None:
    """The checks of one kind of step that need no other step."""
    if isinstance(step, ProcessStep) and step.tool.cwd is not None:
        cwd = PurePosixPath(step.tool.cwd)
        if cwd.is_absolute() or ".." in cwd.parts or "\\" in step.tool.cwd:
            raise _at(
                source,
                positions,
                (*at, "tool", "cwd"),
                "a process tool's cwd is a folder of its package, relative to the package"
                " root, without '..'",
                "process_tool_cwd_invalid",
            )
    if isinstance(step, WaitStep):
        until = step.wait.until
        if until is not None and not (isinstance(until, str) and until.startswith("$")):
            try:
                literal_until(until)
            except ValueError as exc:
                raise _at(
                    source, positions, (*at, "wait", "until"), str(exc), "wait_until_invalid"
                ) from None


def _list_reference(value: str) -> bool:
    try:
        parsed = parse_ref_string(value)
    except ProctorError:
        return False
    return isinstance(parsed, Ref) and parsed.root in ("input", "steps")


def _reference_fields(step: Any) -> list[tuple[Path, Any]]:
    """The fields of a step whose values may hold references."""
    fields: list[tuple[Path, Any]] = []
    if isinstance(step, ProcessStep):
        fields.append((("tool", "args"), step.tool.args))
    if isinstance(step, WaitStep) and isinstance(step.wait.until, str):
        fields.append((("wait", "until"), step.wait.until))
    if hasattr(step, "inputs"):
        fields.append((("inputs",), step.inputs))
    if getattr(step, "idempotency_key", None) is not None:
        fields.append((("idempotency_key",), step.idempotency_key))
    agent = getattr(step, "agent", None)
    if agent is not None:
        fields.append((("agent", "inputs"), agent.inputs))
    if getattr(step, "for_each", None) is not None:
        fields.append((("for_each",), step.for_each))
    return fields


def _check_ref(
    ref: Ref,
    declared: set[str] | None,
    earlier: set[str],
    at: Path,
    source: str,
    positions: Positions,
    fan_out: bool = False,
) -> None:
    if ref.root in ("item", "index"):
        if not fan_out:
            raise _at(
                source,
                positions,
                at,
                f"{ref.text} names a fan-out element: it is allowed only in the inputs of a"
                " skill step with for_each",
                "reference_outside_for_each",
            )
    elif ref.root == "run":
        return  # $run.act: what the host states, null when it states nothing
    elif ref.root == "input":
        if declared is not None and ref.name not in declared:
            raise _at(
                source,
                positions,
                at,
                f"{ref.text} names input {ref.name!r}, which the method's inputs do not declare",
                "reference_unknown_input",
            )
    elif ref.name not in earlier:
        raise _at(
            source,
            positions,
            at,
            f"{ref.text} must name an earlier step of this method; {ref.name!r} is not one",
            "reference_unknown_step",
        )


def parse_ref(ref: str) -> tuple[str, str | None]:
    """Split ``path#method`` into its path and method (``None`` without ``#``).

    Raises:
        UsageError: ``ref_invalid`` for an empty path, an empty method after ``#``, or more
            than one ``#``.
    """
    path, hash_sign, method = ref.partition("#")
    if not path or (hash_sign and not method) or "#" in method:
        raise UsageError(f"skill reference {ref!r} must be PATH or PATH#METHOD", code="ref_invalid")
    if hash_sign and not _METHOD_NAME.match(method):
        raise UsageError(
            f"method name {method!r} must use only a-z, 0-9, '_' and '-'", code="ref_invalid"
        )
    return path, method if hash_sign else None


def select_method(profile: RunProfile, method: str | None) -> tuple[str, Method]:
    """The method a reference runs: the named one, else ``default_method``, else the only one.

    Raises:
        UsageError: ``method_unknown`` naming the method and listing those there are;
            ``method_ambiguous`` when several exist, none is named and there is no default.
    """
    names = sorted(profile.methods)
    if method is not None:
        if method not in profile.methods:
            raise UsageError(
                f"no method {method!r}; methods: {', '.join(names)}", code="method_unknown"
            )
        return method, profile.methods[method]
    if profile.default_method is not None:
        return profile.default_method, profile.methods[profile.default_method]
    if len(names) == 1:
        return names[0], profile.methods[names[0]]
    raise UsageError(
        f"this skill has several methods and no default_method; name one with #METHOD: "
        f"{', '.join(names)}",
        code="method_ambiguous",
    )


def package_dir_for(path_part: str, *, is_dir: bool) -> str:
    """The package folder a reference path names: the folder itself, or the folder of the
    ``SKILL.md`` it points at.

    Raises:
        UsageError: ``not_a_package`` for any other file (a lone markdown file is not a
            package).
    """
    if is_dir:
        return path_part
    pure = PurePosixPath(path_part)
    if pure.name == "SKILL.md":
        return str(pure.parent)
    raise UsageError(
        f"{path_part} is not a skill package: a package is a folder holding SKILL.md "
        "(and optionally run.yaml); a lone markdown file is not one",
        code="not_a_package",
    )


def build_package(
    root_label: str,
    files: Mapping[str, str],
    *,
    proctor_version: str = __version__,
    check_schemas: bool = True,
) -> SkillPackage:
    """Assemble a package from its files' texts (keys are paths relative to the package).

    Only ``SKILL.md`` and ``run.yaml`` are parsed; other files are listed. Texts of other
    files may be passed as empty strings: they are not read. ``check_schemas`` is passed to
    :func:`parse_run_yaml`.

    Raises:
        UsageError: ``not_a_package`` when there is no ``SKILL.md``.
        ParseError: from :func:`parse_skill_md` or :func:`parse_run_yaml`.
    """
    if "SKILL.md" not in files:
        raise UsageError(
            f"{root_label} is not a skill package: a package is a folder holding SKILL.md "
            "(and optionally run.yaml); a lone markdown file is not one",
            code="not_a_package",
        )
    frontmatter, body = parse_skill_md(files["SKILL.md"], f"{root_label}/SKILL.md")
    profile = None
    if "run.yaml" in files:
        profile = parse_run_yaml(
            files["run.yaml"],
            f"{root_label}/run.yaml",
            proctor_version=proctor_version,
            check_schemas=check_schemas,
        )
    return SkillPackage(
        root=root_label,
        name=frontmatter["name"],
        description=frontmatter["description"],
        body=body,
        frontmatter=frontmatter,
        profile=profile,
        files=tuple(sorted(files)),
    )
