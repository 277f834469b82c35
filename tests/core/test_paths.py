"""Sensitive and authority path rules: every listed kind, templates allowed, spellings folded."""

from __future__ import annotations

import pytest

from proctor.core.paths import (
    AUTHORITY_RULES,
    SENSITIVE_RULES,
    TOOL_CONFIG,
    authority_reason,
    content_reason,
    normalize_relpath,
    path_under,
    sensitive_reason,
    tool_config_entry,
)

SENSITIVE = [
    (".git/config", "git_metadata"),
    (".git", "git_metadata"),
    ("sub/.git/HEAD", "git_metadata"),
    (".proctor/runs.sqlite", "proctor_state"),
    ("a/.proctor", "proctor_state"),
    (".env", "env_file"),
    ("app/.env", "env_file"),
    (".env.local", "env_file"),
    (".env.production", "env_file"),
    (".env.example.bak", "env_file"),
    ("prod.env", "env_file"),
    (".envrc", "env_file"),
    ("id_rsa", "private_key_name"),
    ("keys/id_ed25519", "private_key_name"),
    ("id_ecdsa", "private_key_name"),
    ("id_rsa.old", "private_key_name"),
    ("ssh_host_rsa_key", "private_key_name"),
    ("server.pem", "private_key_name"),
    ("tls/server.key", "private_key_name"),
    ("cert.p12", "private_key_name"),
    ("cert.pfx", "private_key_name"),
    ("release.jks", "private_key_name"),
    ("app.keystore", "private_key_name"),
    ("putty.ppk", "private_key_name"),
    ("vault.kdbx", "private_key_name"),
    (".npmrc", "npmrc"),
    ("web/.npmrc", "npmrc"),
    (".netrc", "netrc"),
    ("_netrc", "netrc"),
    (".pgpass", "pgpass"),
    (".pypirc", "pypirc"),
    (".git-credentials", "git_credentials"),
    (".htpasswd", "htpasswd"),
    (".vault-token", "vault_token"),
    (".my.cnf", "mysql_config"),
    ("credentials.json", "cloud_credentials_file"),
    ("infra/terraform.tfstate", "cloud_credentials_file"),
    (".ssh", "ssh_dir"),
    (".ssh/known_hosts", "ssh_dir"),
    ("home/.ssh/config", "ssh_dir"),
    (".gnupg/pubring.kbx", "gnupg_dir"),
    (".aws/credentials", "aws_dir"),
    (".aws/config", "aws_dir"),
    (".kube/config", "kube_dir"),
    (".azure/accessTokens.json", "azure_dir"),
    (".docker/config.json", "docker_config"),
    (".cargo/credentials.toml", "cargo_credentials"),
    (".gem/credentials", "gem_credentials"),
    (".config/gcloud/credentials.db", "gcloud_dir"),
    (".config/gh/hosts.yml", "gh_hosts"),
    ("auro_secrets.yaml", "auro_store"),
    ("config/auro_secrets.yml", "auro_store"),
]

NOT_SENSITIVE = [
    "README.md",
    ".env.example",
    ".env.sample",
    ".env.template",
    ".env.dist",
    ".env.local.example",
    "environment.md",
    "src/env.py",
    ".envoy/config",
    "id_rsa.pub",
    ".sshrc",
    "ssh/notes.md",
    "docs/keys.md",
    ".gitignore",
    ".github/workflows/ci.yml",
    "gitdir/file",
    "docker/config.json",
    ".docker/daemon.json",
    "keyboard.txt",
    "monkey.keys.txt",
    "auro_secrets.yaml.md",
]


@pytest.mark.parametrize(("path", "rule"), SENSITIVE)
def test_every_sensitive_kind_is_named(path: str, rule: str) -> None:
    assert sensitive_reason(path) == rule
    assert rule in SENSITIVE_RULES


@pytest.mark.parametrize("path", NOT_SENSITIVE)
def test_ordinary_files_and_templates_are_not_sensitive(path: str) -> None:
    assert sensitive_reason(path) is None


PEM_HEADS = [
    b"-----BEGIN RSA PRIVATE KEY-----\nMIIE",
    b"-----BEGIN PRIVATE KEY-----\n",
    b"-----BEGIN OPENSSH PRIVATE KEY-----\n",
    b"-----BEGIN EC PRIVATE KEY-----\n",
    b"-----BEGIN ENCRYPTED PRIVATE KEY-----\n",
    b"-----BEGIN PGP PRIVATE KEY BLOCK-----\n",
    b"notes first\n\n-----BEGIN DSA PRIVATE KEY-----\n",
    b"-----begin rsa private key-----",
    b"PuTTY-User-Key-File-3: ssh-ed25519\n",
    "-----BEGIN RSA PRIVATE KEY-----".encode("utf-16"),
]


@pytest.mark.parametrize("head", PEM_HEADS)
def test_private_key_content_is_sensitive_whatever_the_name(head: bytes) -> None:
    assert sensitive_reason("notes/innocent.txt", head) == "private_key_content"
    assert content_reason(head) == "private_key_content"


def test_public_material_is_not_key_content() -> None:
    assert content_reason(b"-----BEGIN CERTIFICATE-----\nMIIB") is None
    assert content_reason(b"-----BEGIN PUBLIC KEY-----\nMIIB") is None
    assert sensitive_reason("a.txt", b"") is None


AUTHORITY = [
    ("policies/default.yaml", "policies_dir"),
    ("policies", "policies_dir"),
    ("Policies/x.yaml", "policies_dir"),
    ("directives/d.md", "directives_dir"),
    (".proctor/config", "proctor_state"),
    ("proctor.toml", "workspace_config"),
    ("skills/hello/SKILL.md", "skill_package"),
    ("skills/hello/run.yaml", "skill_package"),
    ("new/place/skill.md", "skill_package"),
]


@pytest.mark.parametrize(("path", "rule"), AUTHORITY)
def test_authority_files_are_named(path: str, rule: str) -> None:
    assert authority_reason(path, frozenset()) == rule
    assert rule in AUTHORITY_RULES


def test_declared_authority_files_are_matched_folded() -> None:
    declared = frozenset({"guards/mine.py"})
    assert authority_reason("GUARDS/Mine.py", declared) == "authority_file"
    assert authority_reason("./guards//mine.py", declared) == "authority_file"
    assert authority_reason("guards/other.py", declared) is None


@pytest.mark.parametrize(
    "path", ["src/policies/x.py", "docs/directives.md", "skills/hello/main.py", "README.md"]
)
def test_ordinary_files_grant_no_authority(path: str) -> None:
    assert authority_reason(path, frozenset()) is None


def test_normalize_relpath() -> None:
    assert normalize_relpath("./a//b/./c/") == "a/b/c"
    assert normalize_relpath("a\\b\\..\\c") == "a/c"
    assert normalize_relpath("../x") == "../x"
    assert normalize_relpath("a/../../x") == "../x"


@pytest.mark.parametrize(
    ("path", "entry"),
    [
        (".mcp.json", ".mcp.json"),
        ("sub/.MCP.json", ".mcp.json"),
        (".claude/settings.json", ".claude/"),
        (".claude", ".claude/"),
        ("a/b/.cursor/mcp.json", ".cursor/"),
        (".vscode/tasks.json", ".vscode/"),
        (".vscode/launch.json", ".vscode/"),
        (".vscode/settings.json", ".vscode/"),
        (".github/workflows/ci.yml", ".github/workflows/"),
        ("pkg/.github/workflows", ".github/workflows/"),
        (".gitlab-ci.yml", ".gitlab-ci.yml"),
        (".pre-commit-config.yaml", ".pre-commit-config.yaml"),
        ("lib/.gitattributes", ".gitattributes"),
        (".envrc", ".envrc"),
        (".vscode ./tasks.json", ".vscode/"),
    ],
)
def test_other_tools_code_running_config_is_authority(path: str, entry: str) -> None:
    assert entry in TOOL_CONFIG
    assert tool_config_entry(path) == entry
    assert authority_reason(path) == "tool_config"


@pytest.mark.parametrize(
    "path", [".github/CODEOWNERS", "github/workflows/x.yml", "docs/vscode.md", ".gitattributes/x"]
)
def test_near_misses_are_not_tool_config(path: str) -> None:
    assert tool_config_entry(path) is None
    assert authority_reason(path) is None


def test_allow_write_lifts_the_tool_config_rule_only_for_what_it_names() -> None:
    lifted = frozenset({".vscode/settings.json", ".claude"})
    assert authority_reason(".vscode/settings.json", frozenset(), lifted) is None
    assert authority_reason(".VSCode/Settings.json", frozenset(), lifted) is None
    assert authority_reason(".claude/hooks/x.sh", frozenset(), lifted) is None
    assert authority_reason(".vscode/tasks.json", frozenset(), lifted) == "tool_config"
    assert authority_reason("policies/x.yaml", frozenset(), frozenset({"policies"})) == (
        "policies_dir"
    )
    declared = frozenset({".vscode/settings.json"})
    assert authority_reason(".vscode/settings.json", declared, lifted) == "authority_file"


def test_declared_folders_cover_everything_below_them() -> None:
    assert path_under("guardpkg/x/y.py", frozenset({"guardpkg"}))
    assert path_under("GuardPkg/x.py", frozenset({"guardpkg/"}))
    assert not path_under("guardpkgs/x.py", frozenset({"guardpkg"}))
    assert not path_under("anything", frozenset({"", "."}))
