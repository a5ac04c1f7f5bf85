"""Pickling for objects that own live resources (connection pools, locks, loaded weights).

``Reconstructible`` objects travel as the arguments they were built with and are built again where
they are unpickled: pools, locks, sockets and event loops are created there, lazily, as on any new
object. What the caller never passed does not travel, so an API key read from the environment is
read again from the worker's environment and is never written into the pickle; a key passed as
``api_key=`` travels with it (anyone who can read the pickle can read the key). Arguments that are
live resources of the caller (``http_client=``, ``async_http_client=``) cannot travel: pickling
raises ``TypeError`` naming what to pass instead. The recorded arguments that hold a secret
(``api_key``, ``token``, ``password``, ``credentials``, ``headers`` ...) are kept wrapped
(``chatclient.redaction.Secret``, a masked mapping), so ``repr(vars(model))``, a traceback's locals
and a log line never show them; the constructor gets them back unwrapped when the object is rebuilt.

Two objects built with equal arguments compare equal.

Read-only mappings (``types.MappingProxyType``, which messages, responses and options use for their
metadata) pickle here as a read-only copy of their content: importing ``chatclient`` registers that
with ``copyreg``.
"""

from __future__ import annotations

import copyreg
import functools
import inspect
import re
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from chatclient.redaction import MaskedMapping, masked_copy, reveal

__all__ = ["PicklesWithoutLocks", "Reconstructible", "refuse_pickle", "with_fresh_locks", "without_locks"]


def _read_only(content: dict[Any, Any]) -> Mapping[Any, Any]:
    return MappingProxyType(content)


def _reduce_read_only(mapping: MappingProxyType[Any, Any]) -> tuple[Any, ...]:
    return (_read_only, (dict(mapping),))


copyreg.pickle(MappingProxyType, _reduce_read_only)

_LIVE_ARGUMENTS = {
    "http_client": "an httpx.Client",
    "async_http_client": "an httpx.AsyncClient",
}


# "url" too: a connection URL may carry a password (redis://:pw@host).
_SECRET_ARGUMENT = re.compile(r"api_?key|token|secret|password|credential|auth|headers|dsn|url", re.IGNORECASE)


def _mask(name: str, value: Any) -> Any:
    return masked_copy(value) if _SECRET_ARGUMENT.search(name) and not callable(value) else value


def _masked(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The recorded keyword arguments with every secret-bearing one wrapped (masked in any repr)."""
    return {name: _mask(name, value) for name, value in kwargs.items()}


def _positional_names(init: Callable[..., None]) -> tuple[str, ...]:
    """The names of ``init``'s positional parameters after ``self`` (so a secret given by position
    is masked as one given by name)."""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    try:
        params = [p.name for p in inspect.signature(init).parameters.values() if p.kind in kinds]
    except (TypeError, ValueError):
        return ()
    return tuple(params[1:])


def _recording(init: Callable[..., None]) -> Callable[..., None]:
    names = _positional_names(init)

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        # The outermost __init__ records (a subclass calling super().__init__ keeps its own arguments).
        if "_init_call" not in self.__dict__:
            recorded = tuple(_mask(name, value) for name, value in zip(names, args, strict=False)) + args[len(names) :]
            self.__dict__["_init_call"] = (recorded, _masked(kwargs))
        init(self, *args, **kwargs)

    __init__.__chatclient_recording__ = True  # type: ignore[attr-defined]
    return __init__


def _rebuild(cls: type[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    # Secrets were wrapped when recorded: the constructor gets the values themselves (a pickle made
    # before the wrapping carries plain values, which pass through unchanged).
    plain = {name: _plain(value) for name, value in kwargs.items()}
    return cls(*(_plain(value) for value in args), **plain)


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, MaskedMapping) else reveal(value)


class Reconstructible:
    """Mixin: pickles as ``(class, constructor arguments)``; equal when built from equal arguments.

    ``_live_arguments`` names the constructor arguments that hold a live resource of the caller
    (pickling refuses when one was given).
    """

    _live_arguments: dict[str, str] = _LIVE_ARGUMENTS

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        init = cls.__dict__.get("__init__")
        if init is not None and not getattr(init, "__chatclient_recording__", False):
            cls.__init__ = _recording(init)  # type: ignore[method-assign]

    def _construction(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        call = self.__dict__.get("_init_call")
        if call is None:
            raise TypeError(f"{type(self).__name__} cannot be pickled: it was not built through its constructor")
        args, kwargs = call
        return args, kwargs

    def __reduce__(self) -> tuple[Any, ...]:
        args, kwargs = self._construction()
        for name, what in self._live_arguments.items():
            if kwargs.get(name) is not None:
                raise TypeError(
                    f"{type(self).__name__} was built with {name}= ({what}), a live resource of this process that "
                    f"cannot be pickled; build it without {name}= ({self._instead}) or build it inside the "
                    "worker from a factory"
                )
        return (_rebuild, (type(self), args, kwargs))

    _instead = "pass timeout=, headers=, max_retries= instead"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        mine = self.__dict__.get("_init_call")
        theirs = other.__dict__.get("_init_call")
        if mine is None or theirs is None:
            return self is other
        return bool(mine == theirs)

    def __hash__(self) -> int:
        # Consistent with __eq__ (equal objects share a type); arguments may be unhashable.
        return hash(type(self))


def refuse_pickle(obj: Any, instead: str) -> None:
    """Raise the ``TypeError`` of an object that holds a live resource and cannot travel."""
    raise TypeError(f"{type(obj).__name__} holds a live resource of this process and cannot be pickled; {instead}")


_LOCK = type(threading.Lock())
_RLOCK = type(threading.RLock())


class _FreshLock:
    """Stands in a pickle for a lock; unpickling makes a new, unheld one."""

    def __init__(self, reentrant: bool) -> None:
        self.reentrant = reentrant


class _FreshLocal:
    """Stands in a pickle for a ``threading.local``; unpickling makes a new, empty one."""


def without_locks(state: dict[str, Any]) -> dict[str, Any]:
    """A copy of an object's ``__dict__`` with its locks and thread-locals replaced by stand-ins."""
    out: dict[str, Any] = {}
    for name, value in state.items():
        if isinstance(value, _RLOCK):
            out[name] = _FreshLock(True)
        elif isinstance(value, _LOCK):
            out[name] = _FreshLock(False)
        elif isinstance(value, threading.local):
            out[name] = _FreshLocal()
        else:
            out[name] = value
    return out


def with_fresh_locks(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with the stand-ins of ``without_locks`` turned into new locks and thread-locals."""
    out: dict[str, Any] = {}
    for name, value in state.items():
        if isinstance(value, _FreshLock):
            out[name] = threading.RLock() if value.reentrant else threading.Lock()
        elif isinstance(value, _FreshLocal):
            out[name] = threading.local()
        else:
            out[name] = value
    return out


class PicklesWithoutLocks:
    """Mixin: pickles its ``__dict__`` (content included) with fresh locks and thread-locals on arrival."""

    def __getstate__(self) -> dict[str, Any]:
        return without_locks(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(with_fresh_locks(state))
