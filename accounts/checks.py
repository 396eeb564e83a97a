"""System checks (``manage.py check``, and at every start): the group mapping's shape."""

from django.conf import settings
from django.core import checks

from tenants.group_mapping import GroupMappingError, parse_group_mapping


@checks.register(checks.Tags.security)
def check_group_mapping(app_configs, **kwargs) -> list[checks.CheckMessage]:
    try:
        parse_group_mapping(settings.OIDC_GROUP_MAPPING)
    except GroupMappingError as error:
        return [
            checks.Error(
                str(error),
                hint='Each entry: "<group>": {"team": "<slug>", "role": "lead|member|viewer"} '
                'or {"admin": true}.',
                id="accounts.E001",
            )
        ]
    return []
