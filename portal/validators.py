"""Validators shared by every app."""

from django.core.validators import RegexValidator

# Kubernetes DNS-1123 label: what a namespace name (made from a team's slug) must be.
DNS1123_LABEL_MAX_LENGTH = 63
dns1123_label_validator = RegexValidator(
    regex=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z",
    message=(
        "Must be a Kubernetes DNS-1123 label: lower-case letters, digits and '-', "
        "starting and ending with a letter or digit."
    ),
    code="dns1123_label",
)

# A Kubernetes extended resource name such as nvidia.com/gpu or nvidia.com/mig-1g.10gb.
extended_resource_name_validator = RegexValidator(
    regex=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z",
    message="Must be an extended resource name like 'vendor.domain/name', e.g. nvidia.com/gpu.",
    code="extended_resource_name",
)
