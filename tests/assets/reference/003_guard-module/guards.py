from auro_runtime.guards import GuardContext, GuardVerdict, register_guard


@register_guard("check_sensitive_paths")
def check_sensitive_paths(ctx: GuardContext) -> GuardVerdict | None: ...
