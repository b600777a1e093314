"""Events get a generated ``__init__`` that sets slots through their descriptors
(lovia.events._slot_inits): it must behave exactly like the dataclass's own."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from lovia import events as ev

CLASSES = [v for v in vars(ev).values() if isinstance(v, type) and issubclass(v, ev.Event)]


def _reference(cls: type[ev.Event]) -> type[Any]:
    """The same fields as a plain frozen dataclass (its own generated __init__)."""
    spec = [(f.name, f.type, f) for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass("Ref", spec, frozen=True, slots=True, kw_only=True, eq=False)


def _required(cls: type[Any]) -> dict[str, Any]:
    return {
        f.name: object()
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_event_init_matches_the_dataclass_init(cls: type[ev.Event]) -> None:
    ref = _reference(cls)
    assert str(inspect.signature(cls)) == str(inspect.signature(ref))
    names = [f.name for f in dataclasses.fields(cls)]
    required = _required(cls)
    got, want = cls(**required), ref(**required)
    for name in names:  # defaults and factories as the dataclass gives them
        assert getattr(got, name) == getattr(want, name), name
    if names:
        other = cls(**required)
        for f in dataclasses.fields(cls):
            if f.default_factory is not dataclasses.MISSING:  # a fresh object each time
                assert getattr(other, f.name) is not getattr(got, f.name)
    given = {name: object() for name in names}
    full = cls(**given)
    assert all(getattr(full, n) is given[n] for n in names)
    with pytest.raises(dataclasses.FrozenInstanceError):
        full.run_id = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        cls(**given, unknown=1)  # type: ignore[call-arg]
    if required:
        with pytest.raises(TypeError):
            cls(**dict(list(required.items())[1:]))
    with pytest.raises(TypeError):
        cls("positional", **given)  # type: ignore[misc]


def test_every_event_class_has_the_generated_init() -> None:
    assert len(CLASSES) > 20
    for cls in CLASSES:
        assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
        assert "_FACTORY" in cls.__init__.__globals__  # the generated one, not dataclass's
