"""The table's events as types: one class per kind, each naming its kind, with only its own
fields; ``occurrence`` builds one from a kind held as data and never drops what a sender means."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from controller.core.faults import Clearing
from controller.core.state import (
    EVENT_TYPES,
    ClearFault,
    Event,
    Fault,
    FaultRaised,
    KeyEvent,
    LidClosed,
    ModeSwitch,
    RoundContext,
    ShakeDone,
    ShakePressed,
    Tick,
    occurrence,
)
from controller.core.table_faults import CLEARING, NOT_CLEARED
from controller.errors import GameRuleError


def test_every_kind_of_event_has_its_own_class_naming_it() -> None:
    assert set(EVENT_TYPES) == set(Event)
    assert len(set(EVENT_TYPES.values())) == len(Event)
    for event, kind in EVENT_TYPES.items():
        assert kind.event is event
        assert dataclasses.is_dataclass(kind)
        assert {"at", "wall"} <= {f.name for f in dataclasses.fields(kind)}


def test_events_are_frozen_values() -> None:
    tick = Tick(at=5)
    assert tick == Tick(at=5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        tick.at = 6  # type: ignore[misc]


def test_the_supervisor_key_belongs_to_a_persons_key_only() -> None:
    assert issubclass(ShakePressed, KeyEvent)
    assert issubclass(ClearFault, KeyEvent)
    assert not issubclass(Tick, KeyEvent)
    assert not issubclass(ShakeDone, KeyEvent)


def test_occurrence_builds_the_class_of_its_kind() -> None:
    assert occurrence(Event.SHAKE_DONE, at=1, cycles=4) == ShakeDone(at=1, cycles=4)
    assert occurrence(Event.CLEAR_FAULT, at=2, supervisor=True) == ClearFault(at=2, supervisor=True)
    fault = occurrence(Event.FAULT, at=3, fault=Fault.INTERNAL, detail="x")
    assert fault == FaultRaised(at=3, fault=Fault.INTERNAL, detail="x")


def test_occurrence_drops_only_empty_fields_its_kind_does_not_have() -> None:
    # a driver that sends every kind through one call gives each its own fields
    assert occurrence(Event.LID_CLOSED, at=1, cycles=None, fault=None) == LidClosed(at=1)
    assert occurrence(Event.SHAKE_DONE, at=1, cycles=4, detail="") == ShakeDone(at=1, cycles=4)
    with pytest.raises(TypeError, match="supervisor"):
        occurrence(Event.TICK, at=1, supervisor=True)
    with pytest.raises(TypeError, match="cycles"):
        occurrence(Event.LID_CLOSED, at=1, cycles=4)


def test_an_event_without_the_data_its_kind_needs_is_refused() -> None:
    with pytest.raises(GameRuleError, match="mode_switch lacks its data"):
        occurrence(Event.MODE_SWITCH, at=1, supervisor=True, employee="S100")
    with pytest.raises(TypeError):
        ModeSwitch(at=1)  # type: ignore[call-arg]


def test_clear_fault_covers_every_way_faults_py_says_a_fault_is_cleared() -> None:
    assert set(CLEARING) == set(Clearing)
    for fault in Fault:
        assert fault.clearing in CLEARING
    # the last row of why nothing cleared always holds: a refusal always has its words
    holds, _, why = NOT_CLEARED[-1]
    assert holds(RoundContext(), ClearFault(at=1))
    assert why


def test_each_handler_takes_the_kind_of_event_it_is_given() -> None:
    # the handler table is typed loosely (each handler takes its own kind): this keeps it true
    from controller.core import state

    for event, handler in state._HANDLERS.items():
        taken = typing.get_type_hints(handler)["occ"]
        kinds = typing.get_args(taken) or (taken,)
        assert any(issubclass(EVENT_TYPES[event], kind) for kind in kinds), (event, taken)
