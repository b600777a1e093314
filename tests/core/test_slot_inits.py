"""Events and the model seam's per-call types get a generated ``__init__`` that sets
slots through their descriptors (lovia._slots.slot_inits): it must behave exactly like
the dataclass's own."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from lovia import events as ev
from lovia import model
from lovia._slots import slot_inits, slotted
from lovia.guardrails import Guardrail, GuardrailResult
from lovia.result import RunResult
from lovia.tools import Tool
from lovia.usage import RunBudget
from lovia.view import base

EVENTS = [v for v in vars(ev).values() if isinstance(v, type) and issubclass(v, ev.Event)]
OTHERS = [
    model.ModelRequest,
    model.ModelResponse,
    model.TextChunk,
    model.ReasoningChunk,
    model.ToolCallChunk,
    model.RetryNotice,
    base.ViewInput,
    base.BuiltView,
    # config objects: declared with slotted too (no per-class code compiled at import)
    model.ModelProfile,
    model.ModelSettings,
    model.ToolSpec,
    model.OutputSchema,
    RunBudget,
    RunResult,
    Guardrail,
    GuardrailResult,
    Tool,
]
CLASSES: list[type[Any]] = [*EVENTS, *OTHERS]


def _reference(cls: type[Any]) -> type[Any]:
    """The same fields as a plain frozen slotted dataclass (its own generated __init__)."""
    spec = [
        (
            f.name,
            f.type,
            dataclasses.field(
                default=f.default, default_factory=f.default_factory, kw_only=f.kw_only
            ),
        )
        for f in dataclasses.fields(cls)
    ]
    return dataclasses.make_dataclass("Ref", spec, frozen=True, slots=True, eq=False)


def _required(cls: type[Any]) -> dict[str, Any]:
    return {
        f.name: object()
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_generated_init_matches_the_dataclass_init(cls: type[Any]) -> None:
    assert "_FACTORY" in cls.__init__.__globals__  # the generated one, not dataclass's
    ref = _reference(cls)
    assert str(inspect.signature(cls)) == str(inspect.signature(ref))
    names = [f.name for f in dataclasses.fields(cls)]
    required = _required(cls)
    got, want = cls(**required), ref(**required)
    for name in names:  # defaults and factories as the dataclass gives them
        assert getattr(got, name) == getattr(want, name), name
    again = cls(**required)
    for f in dataclasses.fields(cls):
        factory = f.default_factory
        if factory is not dataclasses.MISSING and factory() is not factory():  # not `tuple`
            assert getattr(again, f.name) is not getattr(got, f.name)
    given = {name: object() for name in names}
    full = cls(**given)
    assert all(getattr(full, n) is given[n] for n in names)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(full, names[0], "x")
    with pytest.raises(TypeError):
        cls(**given, unknown=1)
    if required:
        with pytest.raises(TypeError):
            cls(**dict(list(required.items())[1:]))
    positional = [f.name for f in dataclasses.fields(cls) if not f.kw_only]
    args = [given[n] for n in positional]
    rest = {n: given[n] for n in names if n not in positional}
    assert all(getattr(cls(*args, **rest), n) is given[n] for n in names)
    with pytest.raises(TypeError):
        cls(*args, object(), **rest)  # one positional too many


def test_classes_it_cannot_handle_keep_their_own_init() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(slots=True)
    class NotFrozen:
        a: int

    inits = [c.__init__ for c in (Post, NoSlots, NotFrozen)]
    slot_inits([Post, NoSlots, NotFrozen])
    assert [c.__init__ for c in (Post, NoSlots, NotFrozen)] == inits


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_slotted_classes_look_like_plain_dataclasses(cls: type[Any]) -> None:
    """``slotted`` builds them without dataclass's __init__; nothing else may show it."""
    params = cls.__dataclass_params__
    assert (params.init, params.repr, params.frozen) == (True, True, True)
    ref = _reference(cls)
    assert cls.__doc__
    if cls.__doc__.startswith(f"{cls.__name__}("):  # no docstring: dataclass's own text
        assert cls.__doc__ == cls.__name__ + (ref.__doc__ or "").removeprefix("Ref")
    assert {"__repr__", "__setattr__", "__delattr__", "__match_args__"} <= set(vars(cls)) or (
        "__slots__" not in vars(cls)  # an undecorated subclass (MessageCompleted...)
    )


def test_slotted_without_a_docstring_gets_the_dataclass_text() -> None:
    @slotted(frozen=True, slots=True, kw_only=True)
    class Bare:
        a: int
        b: str = "x"

    slot_inits([Bare])
    assert Bare.__doc__ == "Bare(*, a: 'int', b: 'str' = 'x')"
    assert Bare(a=1).b == "x"


def test_slotted_class_slot_inits_cannot_handle_raises() -> None:
    @slotted(frozen=True, slots=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError, match="Post"):
        slot_inits([Post])


def _outcome(op: Any, *args: Any) -> str:
    try:
        op(*args)
    except Exception as exc:  # the kind and text are what is compared
        return f"{type(exc).__name__}: {exc}"
    return "ok"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_shared_methods_behave_like_dataclass_ones(cls: type[Any]) -> None:
    """The repr, frozen setattr/delattr and pickling state of ``slotted`` classes are
    shared code: the same results as dataclass's generated ones (and eq, hash)."""
    import copy
    import pickle

    spec = [
        (f.name, f.type, dataclasses.field(default=f.default, repr=f.repr, kw_only=f.kw_only))
        for f in dataclasses.fields(cls)
    ]
    eq = cls.__dataclass_params__.eq
    ref = dataclasses.make_dataclass(cls.__name__, spec, frozen=True, slots=True, eq=eq)
    values = {f.name: f"v{i}" for i, f in enumerate(dataclasses.fields(cls))}
    got, want = cls(**values), ref(**values)
    assert repr(got) == repr(want)
    assert (got == cls(**values)) is eq
    if eq:
        assert hash(got) == hash(want) == hash(cls(**values))
    else:
        assert cls.__hash__ is object.__hash__
    name = next(iter(values))
    for op, args in ((setattr, ("x",)), (delattr, ())):
        for attr in (name, "nope"):
            assert _outcome(op, got, attr, *args) == _outcome(op, want, attr, *args)
    for again in (pickle.loads(pickle.dumps(got)), copy.copy(got), copy.deepcopy(got)):
        assert type(again) is cls
        assert repr(again) == repr(got)
    owner = next(c for c in cls.__mro__ if "__repr__" in vars(c))  # MessageCompleted...
    assert cls.__repr__.__qualname__ == f"{owner.__qualname__}.__repr__"
    assert cls.__setattr__.__qualname__ == f"{owner.__qualname__}.__setattr__"


def test_event_repr_of_a_recursive_structure() -> None:
    inner: list[Any] = []
    outer = ev.ChildRunEvent(run_id="r", agent="a", call_id="c", child_run_id="k", event=inner)  # type: ignore[arg-type]
    inner.append(outer)
    assert repr(outer).endswith("event=[...])")


def test_subclassing_an_event_keeps_dataclass_rules() -> None:
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True, eq=False)
    class Mine(ev.TextDelta):
        extra: int = 1

    assert repr(Mine(run_id="r", agent="a", text="t")) == (
        "test_subclassing_an_event_keeps_dataclass_rules.<locals>.Mine"
        "(run_id='r', agent='a', turn=0, text='t', extra=1)"
    )
    with pytest.raises(TypeError, match="non-frozen"):

        @dataclasses.dataclass(slots=True, kw_only=True, eq=False)
        class Thawed(ev.TextDelta):
            extra: int = 1
