"""Pure arithmetic on the department tree, given as ``parents`` (department id -> its parent's id,
or None at the top): a department's chain of ancestors, its subtree, and whether a new parent
would close a cycle. Reads the tree from nowhere: ``selectors.department_parents`` does that in
one query."""

from collections.abc import Mapping

Parents = Mapping[int, int | None]


def chain(department_id: int, parents: Parents) -> list[int]:
    """The department, its parent, its parent's parent, ... up to the top (each once, even if
    the stored tree were somehow cyclic)."""
    seen: list[int] = []
    current: int | None = department_id
    while current is not None and current not in seen:
        seen.append(current)
        current = parents.get(current)
    return seen


def subtree(department_id: int, parents: Parents) -> set[int]:
    """The department and every department nested in it, however deep."""
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        if parent is not None:
            children.setdefault(parent, []).append(child)
    found = {department_id}
    stack = [department_id]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def would_cycle(department_id: int, new_parent_id: int | None, parents: Parents) -> bool:
    """Whether making ``new_parent_id`` the department's parent would nest it in itself: the new
    parent is the department or one of the departments nested in it."""
    if new_parent_id is None:
        return False
    return department_id in chain(new_parent_id, parents)
