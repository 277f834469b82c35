"""Team guards for auro-runtime: no reads under private/, and only approved credential aliases."""

from auro_runtime.guards import GuardContext, GuardVerdict, register_guard

APPROVED_ALIASES = {"github_token"}


@register_guard("check_private_reads")
def check_private_reads(ctx: GuardContext) -> GuardVerdict | None:
    if ctx.tool_name not in ("read_file", "list_dir"):
        return None
    path = str(ctx.args.get("path") or "").replace("\\", "/").lstrip("./")
    if path == "private" or path.startswith("private/"):
        return GuardVerdict(
            allowed=False,
            message=f"'{path}' is under private/, which this team keeps out of runs.",
            code="private_path",
            metadata={"key": "path"},
        )
    return None


@register_guard("check_alias_allowlist")
def check_alias_allowlist(ctx: GuardContext) -> GuardVerdict | None:
    if ctx.tool_name != "http_request":
        return None
    alias = ctx.args.get("auth_alias")
    if alias is None or alias in APPROVED_ALIASES:
        return None
    from auro_runtime.guards import GuardVerdict as Verdict  # imported late on purpose

    return Verdict(
        allowed=False,
        message=f"credential alias '{alias}' is not on the team's list.",
        code="alias_not_approved",
    )
