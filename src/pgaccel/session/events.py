"""What a command shows while the runner works (``session.runner.Runner``): the events and
the one question a run may ask.  A command subclasses :class:`RunEvents` (cli/progress.py);
every method may be left as it is."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from ..decide.results import Summary
    from ..lab.experiment import Experiment


class RunEvents:
    """What a command shows while the runner works; every method may be left as is."""

    def say(self, text: str, style: str = "") -> None:
        """A line worth telling (notes, warnings in ``style`` "yellow")."""

    def opened(self, where: str) -> None:
        """The server is open (``where``: its description)."""

    def plan(self, changes: list[dict[str, Any]], not_tested: list[str]) -> None:
        """pgaccel's plan for the opened server: what differs from the defaults and what
        this target cannot set."""

    def variants(self, lvs: list[Any], base: str) -> None:
        """A lab's variants on their servers, verified."""

    # a yes/no question to the user (a build a lab spec needs), or None where nobody can
    # answer (no terminal): then what would have been asked is refused with how to go on
    asker: Callable[[str], bool] | None = None

    def checked(self, lvs: list[Any], refused: dict[str, str], notes: list[str]) -> None:
        """``lab --check``: the variants were verified, nothing will be measured."""

    def starting(self, exp: Experiment, run_id: str, design: dict[str, Any]) -> None:
        """The experiment is about to start (``design``: side by side or why not)."""

    def drive(self, exp: Experiment) -> Summary:
        """Run the experiment, showing its progress."""
        return exp.run()
