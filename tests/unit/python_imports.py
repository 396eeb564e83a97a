"""What a Python file imports, read from its syntax tree (nothing is imported)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path


def imported_modules(path: Path) -> Iterator[str]:
    """Each absolute module ``path`` imports (``import a.b`` and ``from a.b import c`` give
    ``a.b``); relative imports are the file's own package and left out."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
