"""The servers the tests and benchmarks start run the Dockerfile's own command."""

from tests.dockerfile import dockerfile_command, gunicorn_arguments


def without(arguments: list[str], *options: str) -> list[str]:
    """The arguments less each of the options and the value after it."""
    kept, given = [], iter(arguments)
    for argument in given:
        if argument in options:
            next(given)
        else:
            kept.append(argument)
    return kept


def test_the_servers_run_the_dockerfiles_gunicorn_with_their_own_address_and_workers():
    command = dockerfile_command()
    arguments = gunicorn_arguments(bind="127.0.0.1:8123", workers=2)

    assert command[0] == "gunicorn"
    assert arguments[0] == "portal.asgi:application"
    assert arguments[arguments.index("--worker-class") + 1] == "asgi"
    assert arguments[arguments.index("--bind") + 1] == "127.0.0.1:8123"
    assert arguments[arguments.index("--workers") + 1] == "2"
    assert without(arguments, "--bind", "--workers") == without(command[1:], "--bind", "--workers")
