"""Resolve :class:`~nl2sql_assets.config.Settings` for a resource: the environment, then overrides.

Every resource field defaults to ``None``, meaning "whatever the environment says, with the
contract's defaults" (contract.md). A value set on the resource wins. Resolution happens when
a run or tick uses the resource, never at import.
"""

from __future__ import annotations

from pydantic import SecretStr, ValidationError

from nl2sql_assets.config import Settings
from nl2sql_assets.errors import ConfigError


def resolve_settings(**overrides: object) -> Settings:
    """``Settings.from_env()`` with every non-None override applied.

    Secrets given as plain strings are wrapped in ``SecretStr`` so they never print.

    Raises:
        ConfigError: an environment variable or an override is invalid (names the field).
    """
    settings = Settings.from_env()
    update: dict[str, object] = {}
    for name, value in overrides.items():
        if value is None:
            continue
        if name == "openai_api_key" and isinstance(value, str):
            value = SecretStr(value)
        update[name] = value
    if not update:
        return settings
    try:
        return Settings.model_validate({**settings.model_dump(), **update})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        raise ConfigError(err["msg"], source="resource config", field=field) from None
