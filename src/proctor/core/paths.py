"""Which workspace paths hold secrets and which grant authority (pure: no I/O).

Two questions, each answered with the *name of the rule* that decides it (or ``None``):

- :func:`sensitive_reason`: a file a run may never read, list or write, because it holds or
  manages credentials (``.env``, private keys, ``.netrc`` ...) or proctor's / git's own state.
- :func:`authority_reason`: a file a run may never write, because it decides what runs may do
  (``policies/``, ``directives/``, skill packages' ``SKILL.md`` / ``run.yaml``, ``proctor.toml``)
  or because another tool executes what it says (:data:`TOOL_CONFIG`: ``.mcp.json``,
  ``.vscode/``, ``.github/workflows/`` ...). :data:`TOOL_CONFIG` is the one list of those; a
  workspace narrows it only by naming paths in ``[containment] allow_write`` (audited).

Both take a workspace-relative path. Callers that touch the disk resolve the path first
(symlinks, ``..``) and pass the resolved relative form; a policy guard may pass the raw argument.
Matching is deliberately *over*-inclusive, because the question is asked about strings while the
file system decides what they open: every spelling a file system might treat as the same name is
tried (case folded, Unicode normalised, trailing dots and spaces stripped as Windows does, NTFS
``name:stream`` suffixes cut). A path is sensitive when *any* spelling matches. On Linux this
refuses a file deliberately named ``.env `` as if it were ``.env``; that is the fail-closed side.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache
from itertools import pairwise

from proctor.contracts.values import dataclass

__all__ = [
    "AUTHORITY_RULES",
    "SENSITIVE_RULES",
    "TOOL_CONFIG",
    "authority_reason",
    "content_reason",
    "folded_path",
    "name_variants",
    "normalize_relpath",
    "path_under",
    "sensitive_reason",
    "tool_config_entry",
]

# --- normalisation -------------------------------------------------------------------------


def normalize_relpath(relpath: str) -> str:
    """The canonical comparison form of a relative path: POSIX separators, no ``.``/empty parts.

    ``..`` is applied lexically where it can be (``a/../b`` -> ``b``); a leading ``..`` that would
    climb above the root is kept, so the caller can still see and refuse it. Case is kept.
    """
    parts: list[str] = []
    for part in relpath.replace("\\", "/").split("/"):
        if part in ("", "."):
            continue
        if part == ".." and parts and parts[-1] != "..":
            parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


def name_variants(component: str) -> frozenset[str]:
    """Every spelling of one path component that some file system may treat as the same name.

    Case folded; NFC and NFKC (fullwidth ``．ｅｎｖ`` folds to ``.env``); trailing dots and spaces
    stripped (Windows drops them on open); an NTFS alternate-data-stream suffix (``.env::$DATA``)
    cut at the first colon.
    """
    base = _fold(component)
    found = {base, unicodedata.normalize("NFKC", base).casefold()}
    for name in list(found):
        stripped = name.rstrip(" .")
        if stripped:
            found.add(stripped)
        if ":" in name:
            head = name.split(":", 1)[0].rstrip(" .")
            if head:
                found.add(head)
    return frozenset(found)


def _reduced(component: str) -> str:
    """The most reduced spelling of a component: NFKC, folded, stream cut, dots/spaces stripped."""
    name = unicodedata.normalize("NFKC", _fold(component)).casefold()
    name = name.split(":", 1)[0] if ":" in name else name
    return name.rstrip(" .") or name


def _reduced_path(relpath: str) -> str:
    return "/".join(_reduced(p) for p in normalize_relpath(relpath).split("/") if p)


def _components(relpath: str) -> tuple[list[str], list[str]]:
    """(raw components in order, components of the lexically normalised path)."""
    raw = [p for p in relpath.replace("\\", "/").split("/") if p not in ("", ".", "..")]
    norm = [p for p in normalize_relpath(relpath).split("/") if p not in ("", "..")]
    return raw, norm


# --- sensitive files -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    name: str
    description: str
    test: Callable[[str], bool]


_ENV_TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist")


def _is_env_file(name: str) -> bool:
    if name in (".env", ".envrc"):
        return True
    if name.startswith(".env."):
        return not name.endswith(_ENV_TEMPLATE_SUFFIXES)
    return name.endswith(".env") and len(name) > len(".env")


_SSH_KEY_NAME = re.compile(r"^id_(rsa|dsa|ecdsa|ed25519|ecdsa_sk|ed25519_sk|xmss)(?!\.pub$)")
_SSH_HOST_KEY = re.compile(r"^ssh_host_[a-z0-9_]+_key(?!\.pub$)")
_KEY_EXTENSIONS = (
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".p8",
    ".pkcs8",
    ".pkcs12",
    ".jks",
    ".keystore",
    ".bks",
    ".ppk",
    ".kdbx",
)

# Rules on the file's own name (the last component).
_NAME_RULES: tuple[_Rule, ...] = (
    _Rule(
        "env_file",
        "environment file (.env, .env.*, *.env, .envrc; not templates)",
        _is_env_file,
    ),
    _Rule(
        "private_key_name",
        "private key or key store by name (id_rsa, ssh host keys, *.pem, *.key, *.p12, *.pfx, "
        "*.jks, *.keystore, *.ppk ...)",
        lambda n: (
            bool(_SSH_KEY_NAME.match(n) or _SSH_HOST_KEY.match(n)) or n.endswith(_KEY_EXTENSIONS)
        ),
    ),
    _Rule("npmrc", "npm configuration, may hold registry tokens (.npmrc)", lambda n: n == ".npmrc"),
    _Rule("netrc", "network login file (.netrc, _netrc)", lambda n: n in (".netrc", "_netrc")),
    _Rule("pgpass", "PostgreSQL password file (.pgpass)", lambda n: n == ".pgpass"),
    _Rule("pypirc", "Python package index credentials (.pypirc)", lambda n: n == ".pypirc"),
    _Rule(
        "git_credentials",
        "git credential store (.git-credentials)",
        lambda n: n == ".git-credentials",
    ),
    _Rule(
        "auro_store",
        "the reference Python kernel's credential file (auro_secrets.yaml)",
        lambda n: n in ("auro_secrets.yaml", "auro_secrets.yml"),
    ),
    _Rule("htpasswd", "web server password file (.htpasswd)", lambda n: n == ".htpasswd"),
    _Rule("vault_token", "Vault token (.vault-token)", lambda n: n == ".vault-token"),
    _Rule("mysql_config", "MySQL client password file (.my.cnf)", lambda n: n == ".my.cnf"),
    _Rule(
        "cloud_credentials_file",
        "cloud credential file (credentials.json, application_default_credentials.json, *.tfstate)",
        lambda n: (
            n in ("credentials.json", "application_default_credentials.json")
            or n.endswith((".tfstate", ".tfstate.backup"))
        ),
    ),
)

# Rules on any directory component (the path is inside, or is, such a directory).
_DIR_RULES: tuple[_Rule, ...] = (
    _Rule("git_metadata", "git metadata (.git)", lambda n: n == ".git"),
    _Rule("proctor_state", "proctor's own state (.proctor)", lambda n: n == ".proctor"),
    _Rule("ssh_dir", "SSH configuration and keys (.ssh/)", lambda n: n == ".ssh"),
    _Rule("gnupg_dir", "GnuPG keyring (.gnupg/)", lambda n: n == ".gnupg"),
    _Rule("aws_dir", "AWS credentials and configuration (.aws/)", lambda n: n == ".aws"),
    _Rule("kube_dir", "Kubernetes credentials (.kube/)", lambda n: n == ".kube"),
    _Rule("azure_dir", "Azure CLI credentials (.azure/)", lambda n: n == ".azure"),
)

# Rules on a pair of adjacent components (directory, file).
_PAIR_RULES: tuple[tuple[str, str, str, str], ...] = (
    (
        "docker_config",
        "Docker registry credentials (.docker/config.json)",
        ".docker",
        "config.json",
    ),
    ("cargo_credentials", "Cargo registry token (.cargo/credentials)", ".cargo", "credentials"),
    (
        "cargo_credentials",
        "Cargo registry token (.cargo/credentials.toml)",
        ".cargo",
        "credentials.toml",
    ),
    ("gem_credentials", "RubyGems credentials (.gem/credentials)", ".gem", "credentials"),
    ("gcloud_dir", "Google Cloud SDK credentials (.config/gcloud/)", ".config", "gcloud"),
    ("gh_hosts", "GitHub CLI tokens (gh/hosts.yml)", "gh", "hosts.yml"),
)

# A PEM / PGP / PuTTY private key, however the file is called. Loose on purpose: any number of
# dashes and spaces, any label words before PRIVATE KEY, any case.
_PRIVATE_KEY_CONTENT = re.compile(
    rb"-{3,}\s*BEGIN\s+(?:[A-Z0-9]+\s+)*PRIVATE\s+KEY(?:\s+BLOCK)?\s*-{3,}"
    rb"|PuTTY-User-Key-File-\d",
    re.IGNORECASE,
)
# What every match of _PRIVATE_KEY_CONTENT holds: "---", or the PuTTY marker in any case.
_PRIVATE_KEY_CUE = re.compile(rb"-(?:--|(?i:user-key-file-))")

SENSITIVE_RULES: dict[str, str] = {
    **{r.name: r.description for r in _DIR_RULES},
    **{r.name: r.description for r in _NAME_RULES},
    **{name: desc for name, desc, _d, _f in _PAIR_RULES},
    "private_key_content": "holds a private key block (PEM, OpenSSH, PGP or PuTTY), whatever "
    "the file is called",
}
"""Every sensitive-file rule name with a one-line description (for docs, audits, policies)."""


def content_reason(content_head: bytes) -> str | None:
    """``"private_key_content"`` when the bytes hold a private key block, else ``None``.

    NUL bytes are dropped before matching too, so a UTF-16 encoded key is still found.
    """
    data = content_head.replace(b"\x00", b"") if b"\x00" in content_head else content_head
    # Cheap tests first: every PEM/PGP header holds "---" and every PuTTY key its marker, both
    # with a "-" (one memchr); then one scan for either cue (sre finds its leading "-" in C,
    # faster than ``in`` finds "---" or than lowering the bytes). The full regex (slow:
    # case-insensitive, no literal prefix) runs only when a cue is there.
    if b"-" not in data or _PRIVATE_KEY_CUE.search(data) is None:
        return None
    if _PRIVATE_KEY_CONTENT.search(data):
        return "private_key_content"
    return None


def _first_match(rules: Iterable[_Rule], variants: frozenset[str]) -> str | None:
    for rule in rules:
        if any(rule.test(v) for v in variants):
            return rule.name
    return None


def sensitive_reason(relpath: str, content_head: bytes | None = None) -> str | None:
    """The name of the rule that makes ``relpath`` sensitive, or ``None``.

    Args:
        relpath: a workspace-relative path, any separators, any case.
        content_head: the file's leading bytes (or all of them) when the caller has read them;
            a private key block there is sensitive whatever the file is called.

    Every directory component is checked against the directory rules (including components a
    later ``..`` cancels, which only ever errs towards refusing); the final component of the
    lexically normalised path is checked against the file-name rules.
    """
    reason = _path_reason(relpath)
    if reason is None and content_head:
        return content_reason(content_head)
    return reason


@lru_cache(maxsize=8192)
def _path_reason(relpath: str) -> str | None:
    raw, norm = _components(relpath)
    for part in raw:
        reason = _first_match(_DIR_RULES, name_variants(part))
        if reason:
            return reason
    if norm:
        reason = _first_match(_NAME_RULES, name_variants(norm[-1]))
        if reason:
            return reason
        folded = [name_variants(p) for p in norm]
        for name, _desc, dir_name, file_name in _PAIR_RULES:
            for parent, child in pairwise(folded):
                if dir_name in parent and file_name in child:
                    return name
    return None


# --- authority files -------------------------------------------------------------------------

TOOL_CONFIG: dict[str, str] = {
    ".mcp.json": "MCP server definitions (agents start the commands it names)",
    ".claude/": "Claude Code settings, hooks, commands and MCP servers",
    ".cursor/": "Cursor rules, hooks and MCP servers",
    ".vscode/": "VS Code tasks, launch configurations and settings",
    ".devcontainer/": "dev container definition (runs its lifecycle commands)",
    ".husky/": "git hooks installed by husky",
    ".github/workflows/": "GitHub Actions workflows",
    ".github/actions/": "GitHub Actions local actions (run by workflows)",
    ".gitlab-ci.yml": "GitLab CI pipeline",
    ".pre-commit-config.yaml": "pre-commit hooks",
    ".gitattributes": "git attributes (select the filter and diff drivers git runs)",
    ".envrc": "direnv script (runs when a shell enters the folder)",
}
"""Other agents' and tools' code-running configuration, by entry: a name ending in ``/`` is a
folder (everything in it), one with a ``/`` inside is that pair of adjacent names, any other a
file name. Each matches at any depth, every spelling folded as for the sensitive rules. A run
never writes one; ``[containment] allow_write`` in ``proctor.toml`` lifts it for named paths."""


def _tool_entries() -> tuple[tuple[str, tuple[str, ...], bool], ...]:
    out = []
    for entry in TOOL_CONFIG:
        folder = entry.endswith("/")
        out.append((entry, tuple(entry.rstrip("/").split("/")), folder))
    return tuple(out)


_TOOL_ENTRIES = _tool_entries()


@lru_cache(maxsize=8192)
def tool_config_entry(relpath: str) -> str | None:
    """The :data:`TOOL_CONFIG` entry ``relpath`` is, or lies in (``".vscode/"`` ...), or None.

    A folder entry matches the folder itself and everything below it; a file entry the file's
    own name.
    """
    _raw, norm = _components(relpath)
    folded = [name_variants(p) for p in norm]
    for entry, names, folder in _TOOL_ENTRIES:
        width = len(names)
        last = len(folded) - width
        # a folder entry may sit anywhere on the path; a file entry is the path's last name(s)
        starts = range(last + 1) if folder else range(max(last, 0), last + 1)
        for start in starts:
            if all(names[k] in folded[start + k] for k in range(width)):
                return entry
    return None


def folded_path(relpath: str) -> str:
    """The most reduced spelling of a relative path (normalised, every component NFKC-folded,
    stream suffix cut, trailing dots and spaces stripped): two paths some file system may
    open as one file fold to the same text."""
    return _reduced_path(relpath)


def _under(target: str, wanted: frozenset[str]) -> bool:
    if not wanted:
        return False
    if target in wanted:
        return True
    cut = target.rfind("/")
    while cut > 0:
        if target[:cut] in wanted:
            return True
        cut = target.rfind("/", 0, cut)
    return False


@lru_cache(maxsize=256)
def _folded_set(paths: frozenset[str]) -> frozenset[str]:
    return frozenset(f for f in (_reduced_path(p) for p in paths) if f)


def path_under(relpath: str, prefixes: frozenset[str]) -> bool:
    """Whether ``relpath`` is one of ``prefixes`` or lies below one, spellings folded (an empty
    prefix, the whole workspace, matches nothing)."""
    return _under(_reduced_path(relpath), _folded_set(prefixes))


AUTHORITY_RULES: dict[str, str] = {
    "policies_dir": "policy files decide what runs may do (policies/)",
    "directives_dir": "directives steer runs (directives/)",
    "proctor_state": "proctor's own state (.proctor/)",
    "workspace_config": "workspace configuration names guard modules (proctor.toml)",
    "skill_package": "a skill package's definition (SKILL.md, run.yaml)",
    "guard_module": "a guard module proctor.toml names (proctor executes it)",
    "tool_config": "another tool's code-running configuration (.mcp.json, .vscode/, "
    ".github/workflows/ ...)",
    "authority_file": "a file the workspace declares as granting authority",
}
"""Every authority rule name with a one-line description."""

_SKILL_PACKAGE_FILES = frozenset({"skill.md", "run.yaml"})


@lru_cache(maxsize=8192)
def authority_reason(
    relpath: str,
    authority_files: frozenset[str] = frozenset(),
    allow_write: frozenset[str] = frozenset(),
) -> str | None:
    """The name of the rule that makes ``relpath`` an authority file a run never writes, or None.

    Args:
        relpath: a workspace-relative path, any separators, any case.
        authority_files: workspace-relative paths the caller found to grant authority (the
            package files of every skill in the workspace, a guard module's folder ...); each
            covers itself and everything below it, compared in folded form.
        allow_write: workspace-relative paths (files or folders) the workspace lifted from the
            :data:`TOOL_CONFIG` rule; they lift nothing else.

    ``SKILL.md`` and ``run.yaml`` are refused under any folder, not only the known packages:
    creating one makes a new skill package, which is granting authority too.
    """
    raw, norm = _components(relpath)
    for part in raw:
        if ".proctor" in name_variants(part):
            return "proctor_state"
    if not norm:
        return None
    top = name_variants(norm[0])
    if "policies" in top:
        return "policies_dir"
    if "directives" in top:
        return "directives_dir"
    if len(norm) == 1 and ("proctor.toml" in top or "proctor-mcp.lock" in top):
        return "workspace_config"  # the lock pins upstream MCP tool definitions
    if name_variants(norm[-1]) & _SKILL_PACKAGE_FILES:
        return "skill_package"
    if tool_config_entry(relpath) is not None and not (
        allow_write and path_under(relpath, allow_write)
    ):
        return "tool_config"
    if authority_files and path_under("/".join(norm), authority_files):
        return "authority_file"
    return None
