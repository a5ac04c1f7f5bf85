"""What a service interface is declared with: prompt decorators and parameter/return markers.

Markers are ``typing.Annotated`` metadata, so a static type checker sees the plain type
(``V[str]`` is ``str``, ``MemoryId[int]`` is ``int``, ``Partial[Invoice]`` is ``Invoice``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

T = TypeVar("T")
F = TypeVar("F")

MAX_TEMPLATE_FILE_BYTES = 1_000_000
"""Largest prompt file ``system(from_file=...)`` / ``user(from_file=...)`` reads (bytes)."""

SYSTEM_ATTR = "__chatclient_service_system__"
USER_ATTR = "__chatclient_service_user__"


@dataclass(frozen=True, slots=True)
class VarMarker:
    """``Annotated`` metadata: the parameter is a template variable, named ``name`` (else the parameter's name)."""

    name: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryIdMarker:
    """``Annotated`` metadata: the parameter selects the conversation (the chat memory id)."""


@dataclass(frozen=True, slots=True)
class ToolArgMarker:
    """``Annotated`` metadata: the parameter goes to the tools' ``ToolContext`` (under ``name`` or its own name)."""

    name: str | None = None


@dataclass(frozen=True, slots=True)
class PartialMarker:
    """``Annotated`` metadata on a stream's item type: yield partial entities while JSON streams in."""


MEMORY_ID = MemoryIdMarker()
PARTIAL = PartialMarker()


class _Named:
    """Subscription that takes a type, a name, or both: ``X[T]``, ``X["name"]``, ``X[T, "name"]``."""

    _factory: Callable[[str | None], Any]

    def __class_getitem__(cls, item: Any) -> Any:
        if isinstance(item, str):
            return Annotated[Any, cls._factory(item)]
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str):
            return Annotated[item[0], cls._factory(item[1])]
        return Annotated[item, cls._factory(None)]


if TYPE_CHECKING:
    V = Annotated[T, VarMarker()]
    ToolArg = Annotated[T, ToolArgMarker()]
else:

    class V(_Named):
        """A template variable: ``role: V[str]`` (named after the parameter), ``q: V["question"]``
        (named ``question``), or ``q: V[str, "question"]``. Every parameter is a template variable
        under its own name anyway; ``V`` renames it or makes the intent explicit."""

        _factory = VarMarker

    class ToolArg(_Named):
        """A value handed to the service's tools in their ``ToolContext``, never shown to the model:
        ``tenant: ToolArg[str]`` (key ``"tenant"``) or ``t: ToolArg[str, "tenant"]``."""

        _factory = ToolArgMarker


MemoryId = Annotated[T, MEMORY_ID]
"""The conversation a call belongs to: ``user: MemoryId[str]``. Calls with the same id share the
chat memory and are serialised; a method without one uses the conversation ``"default"``."""

Partial = Annotated[T, PARTIAL]
"""Stream item marker: ``def draft(self, text: str) -> Iterator[Partial[Invoice]]`` yields more and
more complete ``Invoice`` objects while the JSON arrives, then the final validated one."""


@dataclass(frozen=True, slots=True)
class TemplateSource:
    """A prompt given to ``system``/``user``: inline text or a file read when the service is built."""

    text: str | None
    path: Path | None

    def load(self, where: str, method: str | None = None) -> str:
        """The template text; ``where`` and ``method`` name the declaration in error messages."""
        if self.path is None:
            return self.text or ""
        from chatclient.errors import AiServiceDefinitionError

        shown = repr(str(self.path))
        try:
            with self.path.open("rb") as f:
                data = f.read(MAX_TEMPLATE_FILE_BYTES + 1)  # bounded: never more than the limit is read
        except OSError as exc:
            raise AiServiceDefinitionError(
                f"{where}: cannot read the prompt file {shown} ({exc.strerror or exc}); "
                "check the path (relative paths are resolved against the current directory)",
                method,
            ) from None
        if len(data) > MAX_TEMPLATE_FILE_BYTES:
            raise AiServiceDefinitionError(
                f"{where}: the prompt file {shown} is larger than {MAX_TEMPLATE_FILE_BYTES} bytes; keep prompt "
                "files small or pass the text directly",
                method,
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise AiServiceDefinitionError(f"{where}: the prompt file {shown} is not UTF-8 text", method) from None


def _source(kind: str, text: str | None, from_file: str | Path | None) -> TemplateSource:
    if (text is None) == (from_file is None):
        raise TypeError(f"@{kind} takes the template text or from_file=..., exactly one of them")
    if text is not None:
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"@{kind} text cannot be empty")
        return TemplateSource(text, None)
    if not isinstance(from_file, (str, Path)):
        raise TypeError(f"@{kind}(from_file=...) takes a path, got {type(from_file).__name__}")
    return TemplateSource(None, Path(from_file))


def _decorator(kind: str, attr: str, text: str | None, from_file: str | Path | None) -> Callable[[F], F]:
    source = _source(kind, text, from_file)

    def mark(target: F) -> F:
        if not callable(target):
            raise TypeError(f"@{kind} decorates a method (or a whole interface class), not {type(target).__name__}")
        setattr(target, attr, source)
        return target

    return mark


def system(text: str | None = None, *, from_file: str | Path | None = None) -> Callable[[F], F]:
    """The system message of a service method (or of every method, when it decorates the interface).

    The text is a jinja2 template over the method's parameters; ``from_file`` reads it (UTF-8, at
    most ``MAX_TEMPLATE_FILE_BYTES``) when the service is built.

    >>> class Helper:
    ...     @system("You are a {{ role }}.")
    ...     def ask(self, question: str, role: str = "teacher") -> str: ...
    """
    return _decorator("system", SYSTEM_ATTR, text, from_file)


def user(text: str | None = None, *, from_file: str | Path | None = None) -> Callable[[F], F]:
    """The user message template of a service method (jinja2 over its parameters).

    Without ``@user`` the method's docstring is the template; without either, a single ``str``
    parameter is sent as the user message, verbatim.
    """
    return _decorator("user", USER_ATTR, text, from_file)


__all__ = [
    "MEMORY_ID",
    "PARTIAL",
    "MemoryId",
    "MemoryIdMarker",
    "Partial",
    "PartialMarker",
    "TemplateSource",
    "ToolArg",
    "ToolArgMarker",
    "V",
    "VarMarker",
    "system",
    "user",
]
