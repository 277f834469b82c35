"""Read policy files, validate every rule against the guard and tool registries, build a PolicySet.

The format is the reference kernel's, read exactly: a file is a mapping with ``id`` (defaults
to the file's stem, as there) and ``rules``; a rule is a mapping with ``id``, ``description``,
``guard``, ``enforcement`` (default ``advisory``), ``on_error`` (default ``fail_closed``),
``tools``, and the reference's optional ``scope`` and ``directives``; a bare string is an
advisory rule. Any other key is refused.

Where rules load from (``load_policy_set``): proctor's shipped files (package data) are always
loaded, then the workspace's ``policies/*.yaml|*.yml``. A workspace file whose policy ``id`` equals
a shipped file's replaces that shipped file (that is how a workspace changes a shipped rule;
under the ``default`` profile the drift check then refuses the change). Every other id must be
unique: two files with one policy id, or one rule id twice anywhere, is a load error.

Evaluation order is fixed: shipped files by file name, then workspace files by file name, then
each file's rule order.
"""

from __future__ import annotations

import re
import types
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, cast

from proctor.contracts.values import dataclass
from proctor.errors import ConfigError, ParseError, PolicyLoadError
from proctor.policy.cedar import CEDAR_SUFFIX, CedarGuard, cedar_rules
from proctor.policy.model import (
    ENFORCEMENTS,
    ON_ERRORS,
    Enforcement,
    OnError,
    PolicyRule,
    PolicySet,
)
from proctor.policy.names import REFERENCE_TOOL_NAMES
from proctor.policy.registry import GuardRegistry

__all__ = [
    "PolicySource",
    "guard_arity_problem",
    "load_policies",
    "load_policy_set",
    "load_policy_sources",
    "shipped_policy_sources",
    "workspace_policy_sources",
]

_FILE_KEYS = frozenset({"id", "rules"})
_RULE_KEYS = frozenset(
    {"id", "description", "scope", "guard", "enforcement", "on_error", "tools", "directives"}
)
_SUFFIXES = (".yaml", ".yml", ".cedar")  # .cedar: Cedar rules (proctor.policy.cedar)
SHIPPED_PREFIX = "proctor:"


@dataclass(frozen=True, slots=True)
class PolicySource:
    """One policy file's text and the name messages show for it (never a host path)."""

    name: str
    text: str
    shipped: bool = False

    @property
    def file_name(self) -> str:
        """The base name (evaluation order sorts on it)."""
        return self.name.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class _Problem:
    file: str
    rule: str | None
    code: str
    message: str
    line: int | None = None
    column: int | None = None

    def render(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}:{self.column}"
        subject = f" rule '{self.rule}':" if self.rule is not None else ""
        return f"{where}:{subject} {self.message}"


@dataclass
class _ParsedFile:
    source: PolicySource
    policy_id: str
    rules: list[tuple[int, Any]]
    positions: dict[tuple[str | int, ...], tuple[int, int]]


# --- sources ------------------------------------------------------------------------------


def shipped_policy_sources() -> list[PolicySource]:
    """proctor's shipped policy files (package data, beside the installed modules), sorted
    by file name."""
    folder = Path(__file__).resolve().parent.parent / "resources" / "policies"
    out = [
        PolicySource(f"{SHIPPED_PREFIX}policies/{entry.name}", entry.read_text("utf-8"), True)
        for entry in folder.iterdir()
        if entry.is_file() and entry.name.endswith(_SUFFIXES)
    ]
    return sorted(out, key=lambda s: s.file_name)


def workspace_policy_sources(workspace: Path) -> list[PolicySource]:
    """The workspace's ``policies/*.yaml|*.yml`` (none when the folder is absent), by file name.

    Raises:
        ConfigError: ``policies`` exists but is not a folder, or a file cannot be read as UTF-8.
    """
    folder = workspace / "policies"
    if not folder.exists():
        return []
    if not folder.is_dir():
        raise ConfigError("'policies' in the workspace is not a folder", code="policies_not_dir")
    return _read_files(sorted(p for p in folder.iterdir() if p.suffix in _SUFFIXES), "policies")


def _read_files(paths: Iterable[Path], prefix: str | None) -> list[PolicySource]:
    out = []
    for path in paths:
        if not path.is_file():
            continue
        name = f"{prefix}/{path.name}" if prefix else path.name
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"{name}: cannot be read as UTF-8 text ({type(exc).__name__})",
                code="policy_unreadable",
            ) from None
        out.append(PolicySource(name, text))
    return sorted(out, key=lambda s: s.file_name)


# --- entry points -------------------------------------------------------------------------


def load_policies(
    dir_or_files: Path | Sequence[Path], registry: GuardRegistry, tools: Collection[str]
) -> PolicySet:
    """Load exactly the given policy files (a folder's ``*.yaml|*.yml``, or a list of files).

    Files are evaluated in file-name order whatever order they were given in. Nothing shipped is
    added; see :func:`load_policy_set` for the workspace form.

    Raises:
        PolicyLoadError: any file or rule is invalid (every problem is listed, each naming its
            file and rule; ``code`` is the first problem's).
        ConfigError: a file cannot be read.
    """
    if isinstance(dir_or_files, Path):
        if dir_or_files.is_dir():
            paths = sorted(p for p in dir_or_files.iterdir() if p.suffix in _SUFFIXES)
            sources = _read_files(paths, dir_or_files.name)
        else:
            sources = _read_files([dir_or_files], None)
    else:
        sources = _read_files(dir_or_files, None)
    return load_policy_sources(sources, registry, tools)


def load_policy_set(
    workspace: Path, registry: GuardRegistry, tools: Collection[str], *, shipped: bool = True
) -> PolicySet:
    """Load the shipped files and the workspace's ``policies/`` as one set (see module doc).

    Raises:
        PolicyLoadError: as :func:`load_policy_sources`.
        ConfigError: as :func:`workspace_policy_sources`.
    """
    base = shipped_policy_sources() if shipped else []
    return load_policy_sources([*base, *workspace_policy_sources(workspace)], registry, tools)


def load_policy_sources(
    sources: Sequence[PolicySource], registry: GuardRegistry, tools: Collection[str]
) -> PolicySet:
    """Parse and validate ``sources`` (already in evaluation order) into a :class:`PolicySet`.

    A non-shipped source whose policy id equals a shipped source's replaces it.

    Raises:
        PolicyLoadError: any file or rule is invalid: YAML errors, unknown keys, a missing or
            empty rule id, an unknown guard, a non-callable guard, a guard not taking exactly
            one positional argument, an unknown enforcement or on_error, warn/block without a
            guard, a guard without an ``enforcement`` key, an empty ``tools`` or ``directives``
            list, an unknown tool name, a duplicate rule id or policy id.
    """
    problems: list[_Problem] = []
    cedar = [s for s in sources if s.name.endswith(CEDAR_SUFFIX)]
    parsed = [
        p for p in (_parse_file(s, problems) for s in sources if s not in cedar) if p is not None
    ]
    merged = {pf.source.name: pf for pf in _merge(parsed, problems)}
    known_tools = frozenset(tools)
    rules: list[PolicyRule] = []
    warnings: list[str] = []
    seen: dict[str, str] = {}
    guards: dict[str, CedarGuard] = {}
    policy_ids: list[str] = []
    for source in sources:  # one order for every file, whatever its language
        if source in cedar:
            found, own = cedar_rules(source.name, source.text, known_tools)
            guards.update(own)
            built: list[tuple[PolicyRule | None, _ParsedFile | None, int]] = [
                (r, None, r.position) for r in found
            ]
            policy_ids.append(f"cedar:{source.file_name}")
        elif source.name in merged:
            pf = merged[source.name]
            policy_ids.append(pf.policy_id)
            built = [
                (_build_rule(pf, pos, raw, registry, known_tools, problems, warnings), pf, pos)
                for pos, raw in pf.rules
            ]
        else:
            continue
        for rule, pf_or_none, position in built:
            if rule is None:
                continue
            if rule.id in seen:
                if pf_or_none is None:
                    raise PolicyLoadError(
                        f"{source.name}: rule id '{rule.id}' is already defined in"
                        f" {seen[rule.id]}; rule ids are unique across all loaded policy files",
                        code="duplicate_rule_id",
                    )
                pf = pf_or_none
            if rule.id in seen:
                problems.append(
                    _problem(
                        pf,
                        rule.id,
                        "duplicate_rule_id",
                        f"rule id already defined in {seen[rule.id]}; rule ids are unique "
                        "across all loaded policy files",
                        ("rules", position),
                    )
                )
                continue
            seen[rule.id] = source.name
            rules.append(rule)
    if problems:
        _raise(problems)
    return PolicySet(rules, policy_ids, warnings, guards)


def _raise(problems: list[_Problem]) -> None:
    lines = [p.render() for p in problems]
    message = (
        lines[0]
        if len(lines) == 1
        else (
            f"{len(lines)} problems in policy files:\n" + "\n".join(f"  - {line}" for line in lines)
        )
    )
    raise PolicyLoadError(
        message,
        code=problems[0].code,
        details={
            "problems": [
                {"file": p.file, "rule": p.rule, "code": p.code, "message": p.message}
                for p in problems
            ]
        },
    )


# --- parsing ------------------------------------------------------------------------------


def _problem(
    pf: _ParsedFile, rule: str | None, code: str, message: str, at: tuple[str | int, ...]
) -> _Problem:
    line_col = pf.positions.get(at)
    line, column = line_col if line_col else (None, None)
    return _Problem(pf.source.name, rule, code, message, line, column)


def _parse_file(source: PolicySource, problems: list[_Problem]) -> _ParsedFile | None:
    from proctor.parser.yaml_strict import load_yaml_with_positions

    try:
        doc, positions = load_yaml_with_positions(source.text, source=source.name)
    except ParseError as exc:
        problems.append(_Problem(source.name, None, exc.code, exc.message))
        return None
    stem = source.file_name.rsplit(".", 1)[0]
    pf = _ParsedFile(source, stem, [], positions)
    if not isinstance(doc, dict):
        problems.append(
            _problem(
                pf,
                None,
                "policy_not_mapping",
                "a policy file is a mapping with 'id' and 'rules'",
                (),
            )
        )
        return None
    unknown = sorted(str(k) for k in doc if k not in _FILE_KEYS)
    if unknown:
        problems.append(
            _problem(
                pf,
                None,
                "unknown_policy_key",
                f"unknown key(s) {unknown}; a policy file has only 'id' and 'rules'",
                (unknown[0],),
            )
        )
    policy_id = doc.get("id", stem)
    if not isinstance(policy_id, str) or not policy_id.strip():
        problems.append(
            _problem(pf, None, "bad_policy_id", "'id' must be a non-empty string", ("id",))
        )
        return None
    pf.policy_id = policy_id
    rules = doc.get("rules")
    if not isinstance(rules, list):
        problems.append(
            _problem(pf, None, "bad_rules", "'rules' must be a list of rules", ("rules",))
        )
        return None
    pf.rules = list(enumerate(rules))
    return pf


def _merge(parsed: list[_ParsedFile], problems: list[_Problem]) -> list[_ParsedFile]:
    replaced = {pf.policy_id for pf in parsed if not pf.source.shipped} & {
        pf.policy_id for pf in parsed if pf.source.shipped
    }
    kept = [pf for pf in parsed if not (pf.source.shipped and pf.policy_id in replaced)]
    owner: dict[str, str] = {}
    out = []
    for pf in kept:
        if pf.policy_id in owner:
            problems.append(
                _problem(
                    pf,
                    None,
                    "duplicate_policy_id",
                    f"policy id '{pf.policy_id}' is already used by {owner[pf.policy_id]}",
                    ("id",),
                )
            )
            continue
        owner[pf.policy_id] = pf.source.name
        out.append(pf)
    return out


def _build_rule(
    pf: _ParsedFile,
    position: int,
    raw: Any,
    registry: GuardRegistry,
    known_tools: frozenset[str],
    problems: list[_Problem],
    warnings: list[str],
) -> PolicyRule | None:
    at: tuple[str | int, ...] = ("rules", position)
    if isinstance(raw, str):
        # The reference format's bare-string rule: advisory text, id cut from it.
        return PolicyRule(
            raw[:32],
            raw,
            None,
            "advisory",
            "fail_closed",
            None,
            pf.source.name,
            position,
            pf.policy_id,
        )
    if not isinstance(raw, dict):
        problems.append(
            _problem(
                pf, None, "bad_rule", f"rule #{position + 1} must be a mapping (or a string)", at
            )
        )
        return None
    rule_id = raw.get("id")
    if not isinstance(rule_id, str) or not rule_id.strip():
        problems.append(
            _problem(pf, f"#{position + 1}", "bad_rule_id", "'id' must be a non-empty string", at)
        )
        return None
    before = len(problems)

    def bad(code: str, message: str, key: str | None = None) -> None:
        problems.append(_problem(pf, rule_id, code, message, (*at, key) if key else at))

    unknown = sorted(str(k) for k in raw if k not in _RULE_KEYS)
    if unknown:
        bad(
            "unknown_rule_key",
            f"unknown key(s) {unknown}; a rule has only {sorted(_RULE_KEYS)}",
            unknown[0],
        )
    description = raw.get("description", "")
    if not isinstance(description, str):
        bad("bad_description", "'description' must be a string", "description")
    scope = raw.get("scope")
    if scope is not None and not isinstance(scope, str):
        bad("bad_scope", "'scope' must be a string", "scope")
    guard = raw.get("guard")
    if guard is not None and (not isinstance(guard, str) or not guard.strip()):
        bad("bad_guard", "'guard' must be a guard name", "guard")
        guard = None
    enforcement = raw.get("enforcement", "advisory")
    # isinstance first: a list or a mapping is unhashable, and ``in`` a frozenset would raise
    if not isinstance(enforcement, str) or enforcement not in ENFORCEMENTS:
        bad(
            "unknown_enforcement",
            f"enforcement {_shown(enforcement)} is not one of {sorted(ENFORCEMENTS)}",
            "enforcement",
        )
        enforcement = None
    on_error = raw.get("on_error", "fail_closed")
    if not isinstance(on_error, str) or on_error not in ON_ERRORS:
        bad(
            "unknown_on_error",
            f"on_error {_shown(on_error)} is not one of {sorted(ON_ERRORS)}",
            "on_error",
        )
    if enforcement in ("warn", "block") and guard is None:
        bad(
            "enforcement_without_guard",
            f"enforcement '{enforcement}' needs a guard to run; name one or make the rule advisory",
            "enforcement",
        )
    if guard is not None and "enforcement" not in raw:
        bad(
            "guard_without_enforcement",
            f"has guard '{guard}' but no enforcement key; left "
            "out, enforcement is advisory and the guard would never run. Declare block, warn "
            "or advisory",
            "guard",
        )
    if guard is not None:
        problem = _guard_problem(guard, registry)
        if problem is not None:
            bad(problem[0], problem[1], "guard")
    tools = _names(raw, "tools", bad)
    directives = _names(raw, "directives", bad)
    resolved: tuple[str, ...] | None = None
    if tools is not None:
        resolved = _resolve_tools(tools, known_tools, bad, warnings, pf.source.name, rule_id)
    if len(problems) > before:
        return None
    return PolicyRule(
        id=rule_id,
        description=cast(str, description),
        guard=guard,
        enforcement=cast(Enforcement, enforcement),
        on_error=cast(OnError, on_error),
        tools=resolved,
        source_file=pf.source.name,
        position=position,
        policy_id=pf.policy_id,
        directives=directives,
        scope=cast("str | None", scope),
        declared_tools=tools,
    )


def _shown(value: Any) -> str:
    """A refused value as a message shows it: a string quoted and cut, else only its type."""
    if isinstance(value, str):
        return repr(value[:60])
    return f"of type {type(value).__name__}"


def _names(raw: dict[str, Any], key: str, bad: Any) -> tuple[str, ...] | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        bad(f"bad_{key}", f"'{key}' must be a list of names", key)
        return None
    if not value:
        bad(
            f"empty_{key}",
            f"'{key}' is an empty list, which would silently disable the rule; "
            "leave the key out to cover everything",
            key,
        )
        return None
    return tuple(value)


_OPERATION_TOOL = re.compile(r"^operation:[a-z][a-z0-9_-]{0,63}/[a-z][a-z0-9_.-]{0,255}$")


def _resolve_tools(
    names: tuple[str, ...],
    known: frozenset[str],
    bad: Any,
    warnings: list[str],
    file: str,
    rule_id: str,
) -> tuple[str, ...]:
    out: list[str] = []
    for name in names:
        if name in known or _OPERATION_TOOL.match(name):
            # an operation (operation:<connector>/<op>) belongs to a package's connectors,
            # which a policy file cannot know: it is named exactly, as the run's tools name it
            mapped: tuple[str, ...] = (name,)
        elif name in REFERENCE_TOOL_NAMES:
            mapped = REFERENCE_TOOL_NAMES[name]
            if not known.intersection(mapped):
                warnings.append(
                    f"{file}: rule '{rule_id}': tool '{name}' maps to {list(mapped)}, none of "
                    "which is registered; the rule cannot fire for it"
                )
        else:
            bad(
                "unknown_tool",
                f"tool '{name}' is neither a registered proctor tool nor a reference tool name",
                "tools",
            )
            continue
        out.extend(t for t in mapped if t not in out)
    return tuple(out)


def _guard_problem(name: str, registry: GuardRegistry) -> tuple[str, str] | None:
    guard = registry.get(name)
    if guard is None:
        return "unknown_guard", f"guard '{name}' is not registered"
    if not callable(guard):
        return "guard_not_callable", f"guard '{name}' is not callable"
    problem = guard_arity_problem(guard)
    if problem is not None:
        return "guard_arity", f"guard '{name}' {problem}"
    return None


def guard_arity_problem(guard: Any) -> str | None:
    """Why ``guard`` cannot be called as ``guard(ctx)``, or ``None`` when it can.

    A plain function is read from its code object; anything else (a method, a wrapped or
    partial function, a callable object) from :func:`inspect.signature`, which is imported then.
    """
    arity = _plain_function_arity(guard)
    if arity is None:
        import inspect

        try:
            sig = inspect.signature(guard)
        except (TypeError, ValueError):
            return None  # builtins without a signature: judged when called
        params = list(sig.parameters.values())
        positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        required = sum(1 for p in positional if p.default is p.empty)
        required_kw = any(p.kind is p.KEYWORD_ONLY and p.default is p.empty for p in params)
    else:
        required, required_kw = arity
    if required_kw:
        return "has required keyword-only parameters; a guard takes exactly one argument"
    if required != 1:
        return (
            "must take exactly one required positional parameter (the GuardContext); it "
            f"requires {required}"
        )
    return None


def _plain_function_arity(guard: Any) -> tuple[int, bool] | None:
    """A plain function's required positional parameters and whether a keyword-only one is
    required, read from its code; ``None`` for anything :func:`inspect.signature` could read
    otherwise (one with ``__wrapped__`` or ``__signature__``, or not a function)."""
    if type(guard) is not types.FunctionType or hasattr(guard, "__wrapped__"):
        return None
    if hasattr(guard, "__signature__"):
        return None
    code = guard.__code__
    required = code.co_argcount - len(guard.__defaults__ or ())
    keyword_only = code.co_varnames[code.co_argcount : code.co_argcount + code.co_kwonlyargcount]
    given = guard.__kwdefaults__ or {}
    return required, any(name not in given for name in keyword_only)
