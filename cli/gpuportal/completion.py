"""Shell completion scripts, written from the argument parser itself, so they never fall behind
the commands: ``gpuportal completion bash`` (source it) and ``gpuportal completion zsh`` (zsh's
``bashcompinit`` runs the same function). They complete commands, options and option values
with fixed choices; job ids and team slugs are the portal's to know, and are not completed."""

from __future__ import annotations

import argparse
import shlex

SHELLS = ("bash", "zsh")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def tree(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(path, words, choices)`` for the parser and each command below it: the words that may
    come next (commands, options) and each option's fixed values."""
    children = _subparsers(parser)
    options: list[str] = []
    choices: dict[str, list[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        options.extend(action.option_strings)
        if action.option_strings and action.choices:
            for option in action.option_strings:
                choices[option] = [str(c) for c in action.choices]
        elif not action.option_strings and action.choices:
            options.extend(str(c) for c in action.choices)  # a positional with fixed values
    yield path, [*children, *options], choices
    for name, child in children.items():
        yield from tree(child, (*path, name))


def bash_script(parser: argparse.ArgumentParser) -> str:
    prog = parser.prog
    function = f"_{prog.replace('-', '_')}_complete"
    nodes = list(tree(parser))
    commands = sorted(" ".join(path) for path, _, _ in nodes if path)
    word_cases = []
    value_cases = []
    for path, words, choices in nodes:
        key = shlex.quote(" ".join(path))
        word_cases.append(f"        {key}) words={shlex.quote(' '.join(words))} ;;")
        for option, values in choices.items():
            value_cases.append(
                f"        {shlex.quote(' '.join(path) + '|' + option)}) "
                f"values={shlex.quote(' '.join(values))} ;;"
            )
    known = "|".join(shlex.quote(c) for c in commands) or "''"
    return f"""# {prog} completion for bash: source <({prog} completion bash)
{function}() {{
    local cur prev path candidate word i words values
    cur="${{COMP_WORDS[COMP_CWORD]}}"
    prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    path=""
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        candidate="${{path:+$path }}$word"
        case "$candidate" in
            {known}) path="$candidate" ;;
        esac
    done
    values=""
    case "$path|$prev" in
{chr(10).join(value_cases)}
    esac
    if [[ -n "$values" ]]; then
        COMPREPLY=($(compgen -W "$values" -- "$cur"))
        return 0
    fi
    words=""
    case "$path" in
{chr(10).join(word_cases)}
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    return 0
}}
complete -o default -F {function} {prog}
"""


def zsh_script(parser: argparse.ArgumentParser) -> str:
    return (
        f"#compdef {parser.prog}\n"
        f"# {parser.prog} completion for zsh: save as _{parser.prog} in a folder on $fpath, "
        f"or: source <({parser.prog} completion zsh)\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash_script(parser)
    )


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    return bash_script(parser) if shell == "bash" else zsh_script(parser)
