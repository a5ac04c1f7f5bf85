"""Prompt templates.

The default renderer is jinja2 in a sandboxed environment: templates cannot reach Python internals,
and an undefined variable is an error that names every missing variable at once. jinja2 is imported
on first use so that ``import chatclient`` stays light.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from chatclient.errors import TemplateError

if TYPE_CHECKING:
    from jinja2 import Template
    from jinja2.sandbox import SandboxedEnvironment


@runtime_checkable
class TemplateRenderer(Protocol):
    """Turns a template and variables into text."""

    def render(self, template: str, variables: Mapping[str, Any]) -> str: ...


class NoOpTemplateRenderer:
    """Returns the template unchanged (for text that must never be interpreted)."""

    def render(self, template: str, variables: Mapping[str, Any]) -> str:
        _check_args(template, variables)
        return template


class JinjaTemplateRenderer:
    """Sandboxed jinja2 renderer; delimiters are configurable.

    >>> JinjaTemplateRenderer().render("Hello {{ name }}", {"name": "Ada"})
    'Hello Ada'
    >>> JinjaTemplateRenderer(variable_start="<", variable_end=">").render("Hi <who>", {"who": "Bob"})
    'Hi Bob'
    """

    def __init__(
        self,
        *,
        variable_start: str = "{{",
        variable_end: str = "}}",
        block_start: str = "{%",
        block_end: str = "%}",
        comment_start: str = "{#",
        comment_end: str = "#}",
        cache_size: int = 256,
    ) -> None:
        self._delimiters = dict(
            variable_start_string=variable_start,
            variable_end_string=variable_end,
            block_start_string=block_start,
            block_end_string=block_end,
            comment_start_string=comment_start,
            comment_end_string=comment_end,
        )
        self._env: SandboxedEnvironment | None = None
        self._cache: dict[str, tuple[Template, frozenset[str]]] = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def _environment(self) -> SandboxedEnvironment:
        if self._env is None:
            from jinja2 import StrictUndefined
            from jinja2.sandbox import SandboxedEnvironment

            self._env = SandboxedEnvironment(
                undefined=StrictUndefined,
                autoescape=False,
                keep_trailing_newline=True,
                **self._delimiters,  # type: ignore[arg-type]
            )
        return self._env

    def _compile(self, template: str) -> tuple[Template, frozenset[str]]:
        cached = self._cache.get(template)
        if cached is not None:
            return cached
        from jinja2 import TemplateSyntaxError, meta

        env = self._environment()
        try:
            ast = env.parse(template)
            compiled = env.from_string(ast)
        except TemplateSyntaxError as exc:
            raise TemplateError(f"The template is not valid: {exc.message} (line {exc.lineno})") from None
        names = frozenset(meta.find_undeclared_variables(ast))
        with self._lock:
            if len(self._cache) >= self._cache_size:
                self._cache.pop(next(iter(self._cache)))
            self._cache[template] = (compiled, names)
        return compiled, names

    def variables(self, template: str) -> frozenset[str]:
        """The top-level variable names a template uses."""
        return self._compile(template)[1]

    def render(self, template: str, variables: Mapping[str, Any]) -> str:
        _check_args(template, variables)
        compiled, names = self._compile(template)
        missing = sorted(n for n in names if n not in variables)
        if missing:
            raise TemplateError(
                "Not all variables were given to the template. Missing variable names are: " + ", ".join(missing) + ".",
                missing,
            )
        from jinja2 import TemplateError as JinjaError
        from jinja2.exceptions import SecurityError, UndefinedError

        try:
            return compiled.render(**variables)
        except SecurityError as exc:
            raise TemplateError(f"The template tried an unsafe operation: {exc}") from None
        except UndefinedError as exc:
            raise TemplateError(f"The template used an undefined value: {exc.message}") from None
        except JinjaError as exc:
            raise TemplateError(f"The template failed to render: {exc}") from None


def _check_args(template: str, variables: Mapping[str, Any]) -> None:
    if not isinstance(template, str) or not template:
        raise ValueError("template cannot be None or empty")
    if variables is None:
        raise ValueError("variables cannot be None")
    for k in variables:
        if not isinstance(k, str) or not k:
            raise ValueError("variable names must be non-empty strings")


_default: JinjaTemplateRenderer | None = None


def default_renderer() -> JinjaTemplateRenderer:
    """The shared default renderer (sandboxed jinja2 with ``{{ }}`` delimiters)."""
    global _default
    if _default is None:
        _default = JinjaTemplateRenderer()
    return _default


def render(template: str, variables: Mapping[str, Any], renderer: TemplateRenderer | None = None) -> str:
    """Render with ``renderer`` or the default one."""
    return (renderer or default_renderer()).render(template, variables)
