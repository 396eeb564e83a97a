"""The completion scripts, run by bash itself."""

import shutil
import subprocess

import pytest

from gpuportal import cli, completion

BASH = shutil.which("bash")


def complete(*words: str) -> list[str]:
    """What bash offers for the last of ``words`` (after ``gpuportal``)."""
    script = completion.script("bash", cli.build_parser())
    line = " ".join(f"'{w}'" for w in ("gpuportal", *words))
    program = (
        f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; "
        '_gpuportal_complete; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run([BASH, "-c", program], capture_output=True, text=True, check=True)
    return done.stdout.split()


pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")


def test_commands_complete():
    assert complete("j") == ["jobs"]
    assert complete("jobs", "") == ["submit", "list", "show", "logs", "stop", "-h", "--help"]
    assert complete("quota", "l") == ["list"]
    assert complete("s") == ["sessions"]
    assert complete("sessions", "") == [
        "list",
        "show",
        "start",
        "stop",
        "resume",
        "-h",
        "--help",
    ]


def test_options_of_a_command_complete():
    assert "--follow" in complete("jobs", "logs", "--")
    assert "--justification" in complete("quota", "request", "--")
    assert "--max-lifetime-hours" in complete("sessions", "start", "--")


def test_option_values_complete_from_their_choices():
    assert complete("jobs", "list", "--state", "r") == ["running"]
    assert complete("-o", "") == ["table", "json"]
    assert complete("completion", "") == ["-h", "--help", "bash", "zsh"]


def test_zsh_script_uses_bash_completion():
    script = completion.script("zsh", cli.build_parser())

    assert script.startswith("#compdef gpuportal\n")
    assert "bashcompinit" in script
    assert "complete -o default -F _gpuportal_complete gpuportal" in script
