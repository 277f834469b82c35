"""What the CLI keeps in the home between processes."""

from __future__ import annotations

__all__ = ["use_home_caches"]


def use_home_caches() -> None:
    """Keep parsed YAML documents in the home's ``cache/yaml`` (see
    :func:`proctor.parser.yaml_strict.use_parse_cache`); none when there is no home."""
    from proctor.errors import ConfigError
    from proctor.parser.yaml_strict import use_parse_cache
    from proctor.runtime.home.files import home_dir

    try:
        home, _ = home_dir()
    except ConfigError:
        return
    use_parse_cache(home / "cache" / "yaml")
