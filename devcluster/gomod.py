"""Generate the `replace` block that lets k8s.io/kubernetes be consumed as a Go dependency.

k8s.io/kubernetes requires its staging modules (k8s.io/api, k8s.io/apiserver, ...) at the
placeholder version v0.0.0 and maps them to ./staging/src/... with `replace` lines. Replace lines
of a dependency are ignored by Go, so a module that imports k8s.io/kubernetes must map every one of
those staging modules to its published v0.MINOR.PATCH version itself. The list of staging modules
is read from k8s.io/kubernetes's own go.mod so that nothing is missed when the pin moves.
"""

from __future__ import annotations

import re

_STAGING_REPLACE = re.compile(
    r"^\s*(?:replace\s+)?(?P<module>k8s\.io/[\w.\-/]+)\s*=>\s*\./staging/src/(?P=module)\s*$"
)


def staging_modules(kubernetes_gomod: str) -> list[str]:
    """Return the k8s.io modules that k8s.io/kubernetes's go.mod maps into ./staging/src/."""
    modules = {
        match.group("module")
        for line in kubernetes_gomod.splitlines()
        if (match := _STAGING_REPLACE.match(line))
    }
    return sorted(modules)


def replace_block(kubernetes_gomod: str, staging_version: str) -> str:
    """Return a go.mod `replace ( ... )` block mapping every staging module to staging_version."""
    modules = staging_modules(kubernetes_gomod)
    if not modules:
        raise ValueError("no ./staging/src replace lines found in the k8s.io/kubernetes go.mod")
    lines = [f"\t{module} => {module} {staging_version}" for module in modules]
    return "replace (\n" + "\n".join(lines) + "\n)\n"


def render_kube_gomod(
    module_path: str,
    go_version: str,
    kubernetes_version: str,
    tools: list[str],
    kubernetes_gomod: str,
    staging_version: str,
) -> str:
    """Render the initial go.mod of the module that builds the Kubernetes binaries.

    `go mod tidy` fills in the indirect requirements afterwards.
    """
    tool_lines = "\n".join(f"\t{tool}" for tool in tools)
    return (
        f"module {module_path}\n\n"
        f"go {go_version}\n\n"
        f"require k8s.io/kubernetes {kubernetes_version}\n\n"
        f"tool (\n{tool_lines}\n)\n\n" + replace_block(kubernetes_gomod, staging_version)
    )
