"""A faster ``__init__`` for frozen slotted dataclasses built on the hot path.

A frozen dataclass's generated ``__init__`` sets each field with
``object.__setattr__(self, name, value)``: a generic attribute lookup per field, about
half the cost of building a small object. :func:`slot_inits` gives each class an
``__init__`` with the same parameters (positional, then keyword-only), defaults and
default factories that sets each field through its slot's member descriptor instead. The
classes stay frozen: assignment after ``__init__`` still raises ``FrozenInstanceError``.
Used for the events and the model seam's per-call types (~20 objects per model call),
and for the frozen config objects (settings, tools, budgets, results) at import time.

Such classes are declared with :func:`slotted` (``dataclass`` to type checkers): at run
time it builds the dataclass without its own ``__init__`` (``init=False``), since
:func:`slot_inits` replaces it anyway, and gives it the ``__repr__`` and frozen
``__setattr__``/``__delattr__`` dataclass would as closures, not as source compiled per
class (~0.3 ms per class at ``import lovia``, for ~40 classes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, Field, FrozenInstanceError, dataclass, fields, is_dataclass
from threading import get_ident
from typing import TYPE_CHECKING, Any

__all__ = ["slot_inits", "slotted"]

if TYPE_CHECKING:
    from dataclasses import dataclass as slotted
else:

    def slotted(**params: Any) -> Callable[[type], type]:
        """``dataclass(**params)`` without the generated ``__init__``: the module must
        pass the class to :func:`slot_inits` (which raises if it cannot give it one).
        Its ``__repr__``, and if frozen its ``__setattr__``/``__delattr__``, are shared
        code, not compiled per class (a frozen ``eq`` class gets the same ``__hash__``
        through ``unsafe_hash``): ``slot_inits`` then sets the dataclass params as
        declared."""

        def wrap(cls: type) -> type:
            documented = cls.__dict__.get("__doc__") is not None
            if not documented:  # dataclass would build it from a signature without __init__
                cls.__doc__ = "-"
            own_hash = "__hash__" in cls.__dict__ or "__eq__" in cls.__dict__
            frozen = params.get("frozen", False) and not params.get("unsafe_hash") and not own_hash
            rep = params.get("repr", True)
            eq = params.get("eq", True)
            opts = {**params, "init": False, "repr": False}
            if frozen:  # unsafe_hash: the __hash__ dataclass adds to a frozen eq class
                opts.update(frozen=False, unsafe_hash=eq)
            new = dataclass(**opts)(cls)
            if not documented:  # slot_inits builds it, as dataclass does, once __init__ is in
                new.__doc__ = None
            _add_methods(new, cls, frozen=frozen, rep=rep)
            _DECLARED[new] = (frozen, rep)
            return new

        return wrap


# slotted classes whose dataclass params slot_inits still has to set as declared
_DECLARED: dict[type, tuple[bool, bool]] = {}


def _add_methods(cls: type, before_slots: type, *, frozen: bool, rep: bool) -> None:
    """Give ``cls`` the ``__repr__`` (and if ``frozen`` the ``__setattr__``,
    ``__delattr__`` and pickling state) dataclass would: the same code, in closures made
    here instead of source compiled per class. As dataclass's, the frozen methods refer
    to the class before slots were added (so other names raise its ``super`` TypeError)."""
    names = tuple(f.name for f in fields(cls))
    shown = tuple(f.name for f in fields(cls) if f.repr)

    def __repr__(self: Any) -> str:
        key = id(self), get_ident()
        if key in running:  # as dataclass's repr of a recursive structure
            return "..."
        running.add(key)
        try:
            inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
            return f"{self.__class__.__qualname__}({inner})"
        finally:
            running.discard(key)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is before_slots or name in names:
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super(before_slots, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is before_slots or name in names:
            raise FrozenInstanceError(f"cannot delete field {name!r}")
        super(before_slots, self).__delattr__(name)

    running: set[tuple[int, int]] = set()
    methods = ([__repr__] if rep else []) + ([__setattr__, __delattr__] if frozen else [])
    for method in methods:
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
        method.__module__ = cls.__module__
        setattr(cls, method.__name__, method)
    if frozen:  # pickling state as dataclass gives frozen slotted classes
        setattr(cls, "__getstate__", _getstate)  # noqa: B010
        setattr(cls, "__setstate__", _setstate)  # noqa: B010


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(fields(self), state, strict=False):
        object.__setattr__(self, f.name, value)


class _Factory:
    """The default shown for a field with a ``default_factory`` (as dataclasses shows it)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _supported(cls: type) -> bool:
    params = getattr(cls, "__dataclass_params__", None)
    return (
        is_dataclass(cls)
        and params is not None
        and params.frozen
        and "__slots__" in cls.__dict__
        and "__post_init__" not in dir(cls)
        and all(f.init for f in fields(cls))
    )


def _param(k: int, f: Field[Any], ns: dict[str, Any], body: list[str]) -> str:
    name = f.name
    if f.default is not MISSING:
        ns[f"_d{k}_{name}"] = f.default
        return f"{name}=_d{k}_{name}"
    if f.default_factory is not MISSING:
        ns[f"_f{k}_{name}"] = f.default_factory
        body.append(f"    if {name} is _FACTORY: {name} = _f{k}_{name}()")
        return f"{name}=_FACTORY"
    return name


def _without_init(cls: type) -> bool:
    params = cls.__dict__.get("__dataclass_params__")
    return params is not None and not params.init


def _annotations(cls: type) -> dict[str, Any]:
    if _without_init(cls):  # what dataclass's own __init__ would have
        return {**{f.name: f.type for f in fields(cls)}, "return": None}
    old: Any = cls.__init__
    return dict(old.__annotations__)


def slot_inits(classes: list[type]) -> None:
    """Replace the ``__init__`` of each frozen slotted dataclass in ``classes`` (others,
    and ones with ``__post_init__`` or ``init=False`` fields, are left as they are; a
    :func:`slotted` class among those raises ``TypeError``: it would have no ``__init__``)."""
    for cls in classes:
        frozen, rep = _DECLARED.pop(cls, (False, False))
        params = cls.__dict__["__dataclass_params__"] if frozen or rep else None
        if params is not None:  # set as declared, now that the module's classes are built
            if frozen:
                params.frozen, params.unsafe_hash = True, False
            params.repr = params.repr or rep
    todo = [cls for cls in classes if _supported(cls)]
    bad = [cls.__qualname__ for cls in classes if _without_init(cls) and cls not in todo]
    if bad:
        raise TypeError(f"slot_inits cannot give an __init__ to {', '.join(bad)}")
    src: list[str] = []
    ns: dict[str, Any] = {"_FACTORY": _FACTORY}
    for k, cls in enumerate(todo):
        positional: list[str] = []
        keyword: list[str] = []
        body: list[str] = []
        for f in fields(cls):
            param = _param(k, f, ns, body)
            (keyword if f.kw_only else positional).append(param)
            ns[f"_s{k}_{f.name}"] = getattr(cls, f.name).__set__  # the slot's descriptor
            body.append(f"    _s{k}_{f.name}(self, {f.name})")
        params = ["self", *positional, *(["*", *keyword] if keyword else [])]
        src.append(f"def _init{k}({', '.join(params)}):\n" + "\n".join(body or ["    pass"]))
    exec("\n".join(src), ns)  # generated from the dataclass fields only
    for k, cls in enumerate(todo):
        init = ns[f"_init{k}"]
        init.__qualname__ = f"{cls.__qualname__}.__init__"
        init.__module__ = cls.__module__
        init.__annotations__ = _annotations(cls)
        setattr(cls, "__init__", init)  # noqa: B010
        if _without_init(cls):  # now it has one, as dataclass(init=True) would say
            cls.__dict__["__dataclass_params__"].init = True
        if cls.__doc__ is None:  # as dataclass documents a class without a docstring
            cls.__doc__ = _doc(cls)


def _doc(cls: type) -> str:
    import inspect  # only for the few classes without a docstring

    return cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
