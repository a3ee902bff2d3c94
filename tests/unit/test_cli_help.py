"""Every option of every attn-grade command says what it does (issue 21: `gradescope --out`
had no help text)."""

from __future__ import annotations

import argparse

from autograder.cli.app import parser


def commands(top: argparse.ArgumentParser | None = None, prefix: str = "") -> dict:
    """ "name" -> parser for every command and sub-command (`classroom init`, ...)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in (top or parser())._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                found[prefix + name] = command
                found.update(commands(command, f"{prefix}{name} "))
    return found


def test_every_command_and_option_has_help_text():
    found = commands()
    assert {"build", "grade", "autograde", "demo", "feedback-zip", "classroom init"} <= set(found)
    silent = [
        f"{name} {'/'.join(action.option_strings) or action.dest}"
        for name, command in found.items()
        for action in command._actions
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
        and not (action.help or "").strip()
    ]
    assert not silent, f"options without help text: {silent}"
