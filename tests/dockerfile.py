"""What the Dockerfile runs: its CMD and the environment its ENV lines set, read from the file
itself so that the tests and benchmarks serving the portal "as the Dockerfile does" cannot drift
from it. Pure: no Django, no pytest."""

import json
import shlex
from pathlib import Path

DOCKERFILE = Path(__file__).resolve().parents[1] / "Dockerfile"


def _instructions() -> list[str]:
    """Each instruction on one line (continuations joined), comments left out."""
    lines = [
        line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")
    ]
    return "\n".join(lines).replace("\\\n", " ").splitlines()


def dockerfile_command() -> list[str]:
    """The Dockerfile's CMD, as a list."""
    for line in _instructions():
        if line.startswith("CMD "):
            return json.loads(line.removeprefix("CMD "))
    raise AssertionError("the Dockerfile has no CMD [...]")


def gunicorn_arguments(*, bind: str, workers: int) -> list[str]:
    """gunicorn's arguments in the Dockerfile's CMD (its program left out: the caller runs
    ``python -m gunicorn``), with the address and the number of workers given here."""
    command = dockerfile_command()
    if command[0] != "gunicorn":
        raise AssertionError(f"the Dockerfile's CMD runs {command[0]}, not gunicorn")
    arguments, values = [], {"--bind": bind, "--workers": str(workers)}
    given = iter(command[1:])
    for argument in given:
        arguments.append(argument)
        if argument in values:
            next(given)
            arguments.append(values.pop(argument))
    for option, value in values.items():
        arguments += [option, value]
    return arguments


def dockerfile_environment() -> dict[str, str]:
    """The variables the Dockerfile's ENV lines set (``ENV NAME=value ...``)."""
    environment = {}
    for line in _instructions():
        if line.startswith("ENV "):
            for pair in shlex.split(line.removeprefix("ENV ")):
                name, _, value = pair.partition("=")
                environment[name] = value
    return environment
