"""``controller.core.evolve.replace`` makes what ``dataclasses.replace`` makes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from controller.core.evolve import replace
from controller.core.table_types import Action, ActionKind, RoundContext, State


@dataclass(frozen=True, slots=True)
class Checked:
    low: int
    high: int

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError("low above high")


@dataclass(frozen=True)
class Derived:
    base: int
    twice: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "twice", 2 * self.base)


@pytest.mark.parametrize(
    "changes",
    [{}, {"state": State.ARMED}, {"state": State.RESULT, "attempt": 3, "round_number": 9}],
)
def test_the_round_context_is_replaced_as_dataclasses_does_it(changes: dict[str, object]) -> None:
    ctx = RoundContext(attempt=2)
    made = replace(ctx, **changes)  # type: ignore[arg-type]  # the cases' values vary
    assert made == dataclasses.replace(ctx, **changes)  # type: ignore[arg-type]
    assert type(made) is RoundContext
    assert made is not ctx


def test_an_action_keeps_what_is_not_changed() -> None:
    action = Action(ActionKind.SHOW, data={"a": 1})
    assert replace(action, data={"b": 2}) == dataclasses.replace(action, data={"b": 2})


def test_post_init_runs_on_the_new_object() -> None:
    assert replace(Checked(1, 2), high=5) == Checked(1, 5)
    with pytest.raises(ValueError, match="low above high"):
        replace(Checked(1, 2), low=3)


def test_a_field_the_class_lacks_is_refused() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        replace(Checked(1, 2), nope=1)  # type: ignore[call-arg]


def test_a_class_with_a_field_not_in_init_is_left_to_dataclasses() -> None:
    assert replace(Derived(2), base=5).twice == 10
    with pytest.raises(ValueError, match="init=False"):
        replace(Derived(2), twice=1)  # type: ignore[call-arg]
