"""Prompt templates.

The default renderer is jinja2 in a sandboxed environment: templates cannot reach Python internals,
and an undefined variable is an error that names every missing variable at once. jinja2 is imported
on first use so that ``import chatclient`` stays light.

The sandbox also bounds what a template can cost, because a template may come from a less trusted
place than the code that renders it (a prompt file, a database row):

- arithmetic is checked before it runs: ``**`` and ``*`` refuse integers beyond
  ``MAX_INTEGER_BITS`` bits, and ``*``/``+`` refuse strings and lists longer than the output cap;
- a numeric argument to any function, method or filter (``range``, ``center``, ``ljust``,
  ``wordwrap`` ...) larger than the output cap is refused;
- every ``{% for %}`` loop of one rendering draws from one budget of ``max_iterations`` items,
  so nested loops cannot multiply into billions of steps;
- the rendered text may not exceed ``max_output_chars`` characters.

Every refusal, like every other rendering failure, is a :class:`~chatclient.errors.TemplateError`.
"""

from __future__ import annotations

import contextvars
import functools
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from chatclient.errors import TemplateError

if TYPE_CHECKING:
    from jinja2 import Template
    from jinja2.sandbox import SandboxedEnvironment

MAX_OUTPUT_CHARS = 10_000_000
"""Default cap on the characters one rendering produces (and on any string or list it builds)."""

MAX_ITERATIONS = 100_000
"""Default budget of ``{% for %}`` loop items in one rendering, all loops together."""

MAX_INTEGER_BITS = 4096
"""Largest integer (in bits, about 1233 decimal digits) that template arithmetic may produce."""

_LOOP_FILTER = "chatclient_bounded_loop"
_CONCAT_FILTER = "chatclient_bounded_concat"
# Items left in the loop budget of the rendering running in this context (None outside a rendering).
_budget: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("chatclient_template_budget", default=None)


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

    ``max_output_chars`` caps the rendered text (and any string or list a template builds);
    ``max_iterations`` is the budget of ``{% for %}`` items of one rendering, all loops together.
    Going past either, or past the arithmetic bounds described in this module, is a
    :class:`~chatclient.errors.TemplateError`.

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
        max_output_chars: int = MAX_OUTPUT_CHARS,
        max_iterations: int = MAX_ITERATIONS,
    ) -> None:
        if max_output_chars < 1 or max_iterations < 0:
            raise ValueError("max_output_chars must be at least 1 and max_iterations at least 0")
        self.max_output_chars = max_output_chars
        self.max_iterations = max_iterations
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

    def __getstate__(self) -> dict[str, Any]:
        # The compiled environment (a class made at run time) and its cache are rebuilt on first use.
        state = self.__dict__.copy()
        state.update(_env=None, _cache={})
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _environment(self) -> SandboxedEnvironment:
        if self._env is None:
            self._env = _bounded_environment(self.max_output_chars, self._delimiters)
        return self._env

    def _compile(self, template: str) -> tuple[Template, frozenset[str]]:
        cached = self._cache.get(template)
        if cached is not None:
            return cached
        from jinja2 import TemplateSyntaxError, meta

        env = self._environment()
        try:
            ast = env.parse(template)
            _bound_loops(ast)
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

        budget = _budget.set([self.max_iterations])
        try:
            return self._generate(compiled, variables)
        except _LimitError as exc:
            raise TemplateError(f"The template exceeded a limit: {exc}") from None
        except SecurityError as exc:
            raise TemplateError(f"The template tried an unsafe operation: {exc}") from None
        except UndefinedError as exc:
            raise TemplateError(f"The template used an undefined value: {exc.message}") from None
        except JinjaError as exc:
            raise TemplateError(f"The template failed to render: {exc}") from None
        except OverflowError as exc:  # jinja's sandboxed range() refuses more than 100000 items this way
            raise TemplateError(f"The template exceeded a limit: {exc}") from None
        except (ArithmeticError, TypeError, ValueError, LookupError) as exc:  # {{ 1/0 }}, {{ 'a' * 'b' }}
            raise TemplateError(f"The template failed to render: {type(exc).__name__}: {exc}") from None
        except RecursionError:  # a macro calling itself without end
            raise TemplateError("The template recursed too deeply (a macro calling itself?)") from None
        finally:
            _budget.reset(budget)

    def _generate(self, compiled: Template, variables: Mapping[str, Any]) -> str:
        # Streaming the output lets the size cap stop a long loop early instead of after the fact.
        parts: list[str] = []
        size = 0
        for chunk in compiled.generate(**variables):
            size += len(chunk)
            if size > self.max_output_chars:
                raise _LimitError(
                    f"the output is longer than max_output_chars={self.max_output_chars}; raise it on "
                    "JinjaTemplateRenderer if such output is expected"
                )
            parts.append(chunk)
        return "".join(parts)


class _LimitError(Exception):
    """A template went past one of the renderer's bounds (jinja re-raises it unchanged)."""


def _limit(message: str) -> _LimitError:
    return _LimitError(message)


def _size(value: Any) -> int | None:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_binop(op: str, left: Any, right: Any, max_chars: int) -> None:
    """Refuse an operation whose result would be huge, before computing it."""
    if op == "**" and _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
        if right * math.log2(abs(left)) > MAX_INTEGER_BITS:
            raise _limit(f"'{left} ** {right}' would exceed {MAX_INTEGER_BITS} bits")
    elif op == "*":
        if _is_int(left) and _is_int(right):
            if left.bit_length() + right.bit_length() > MAX_INTEGER_BITS + 1:
                raise _limit(f"the product would exceed {MAX_INTEGER_BITS} bits")
            return
        for seq, count in ((left, right), (right, left)):
            length = _size(seq)
            if length is not None and _is_int(count) and length * count > max_chars:
                raise _limit(f"repeating a sequence {count} times would exceed max_output_chars={max_chars}")
    elif op == "+":
        a, b = _size(left), _size(right)
        if a is not None and b is not None and a + b > max_chars:
            raise _limit(f"concatenating would exceed max_output_chars={max_chars}")
    elif op == "%" and isinstance(left, str):
        # printf-style widths ('%*s' % (10**9, 'x'), '%999999999s') allocate their padding up front
        args = right if isinstance(right, tuple) else (right,)
        _check_call_args(args, max_chars)
        _check_format_text(left, max_chars)


def _check_format_text(text: str, max_chars: int) -> None:
    """Refuse a format string holding a number (a width or precision) beyond the cap."""
    limit_digits = len(str(max_chars))
    run = 0
    for i, ch in enumerate(text):
        if "0" <= ch <= "9":
            run += 1
            continue
        if run >= limit_digits and int(text[i - run : i]) > max_chars:
            raise _limit(f"a format width beyond max_output_chars={max_chars}")
        run = 0
    if run >= limit_digits and int(text[len(text) - run :]) > max_chars:
        raise _limit(f"a format width beyond max_output_chars={max_chars}")


def _joined_size(items: Any) -> int:
    if isinstance(items, str):
        return len(items)
    if not isinstance(items, (list, tuple)):
        return 0  # an iterator must not be consumed here; the result check catches it
    return sum(len(x) if isinstance(x, str) else len(str(x)) for x in items)


def _check_text_call(name: str, target: Any, args: tuple[Any, ...], max_chars: int) -> None:
    """Pre-check the string operations whose output can be far larger than their inputs."""
    if name == "join":
        seq = args[0] if args else ()
        sep = len(target) if isinstance(target, str) else 0
        count = len(seq) if isinstance(seq, (list, tuple, str)) else 0
        if _joined_size(seq) + sep * count > max_chars:
            raise _limit(f"joining would exceed max_output_chars={max_chars}")
    elif name == "replace" and isinstance(target, str) and len(args) >= 2:
        old, new = args[0], args[1]
        if isinstance(old, str) and isinstance(new, str) and len(new) > len(old):
            hits = target.count(old) if old else len(target) + 1
            if len(target) + hits * (len(new) - len(old)) > max_chars:
                raise _limit(f"replacing would exceed max_output_chars={max_chars}")
    elif name in ("format", "format_map") and isinstance(target, str):
        _check_format_text(target, max_chars)


def _check_result(value: Any, max_chars: int) -> Any:
    # The backstop for growth the pre-checks do not model: a value past the cap is never kept.
    size = _size(value)
    if size is not None and size > max_chars:
        raise _limit(f"a value of {size} items exceeds max_output_chars={max_chars}")
    return value


def _check_call_args(args: Iterable[Any], max_chars: int) -> None:
    # Padding, wrapping and repeating functions size their output from a number argument.
    for a in args:
        if _is_int(a) and abs(a) > max_chars:
            raise _limit(f"the argument {a} is larger than max_output_chars={max_chars}")


def _bounded_filter(name: str, fn: Callable[..., Any], max_chars: int) -> Callable[..., Any]:
    # Filters are called directly by compiled templates (not through ``environment.call``), so each
    # one is wrapped. The value being filtered is not checked, only the filter's own arguments.
    skip = 2 if getattr(fn, "jinja_pass_arg", None) is not None else 1

    @functools.wraps(fn)  # also copies ``jinja_pass_arg``, so jinja still passes the context
    def bounded(*args: Any, **kwargs: Any) -> Any:
        _check_call_args(args[skip:], max_chars)
        _check_call_args(kwargs.values(), max_chars)
        if len(args) >= skip:
            value = args[skip - 1]
            if name == "join":
                _check_text_call("join", kwargs.get("d", args[skip] if len(args) > skip else ""), (value,), max_chars)
            elif name in ("replace", "format"):
                _check_text_call(name, value, tuple(args[skip:]), max_chars)
        return _check_result(fn(*args, **kwargs), max_chars)

    return bounded


def _bounded_loop(iterable: Any) -> Iterator[Any]:
    budget = _budget.get()
    for item in iterable:
        if budget is not None:
            budget[0] -= 1
            if budget[0] < 0:
                raise _limit("the loops ran more items than max_iterations allows; raise it on JinjaTemplateRenderer")
        yield item


def _bound_loops(ast: Any) -> None:
    """Route every ``{% for %}`` iterable through the loop budget (a filter jinja compiles normally)."""
    from jinja2 import nodes

    for loop in ast.find_all(nodes.For):
        loop.iter = nodes.Filter(loop.iter, _LOOP_FILTER, [], [], None, None, lineno=loop.lineno)
    # ``a ~ b`` compiles to a plain join that no sandbox hook sees: make it a checked filter call.
    stack = [ast]
    while stack:
        node = stack.pop()
        for field in node.fields:
            value = getattr(node, field, None)
            if isinstance(value, nodes.Concat):
                setattr(node, field, _checked_concat(value))
            elif isinstance(value, list):
                value[:] = [_checked_concat(v) if isinstance(v, nodes.Concat) else v for v in value]
        stack.extend(node.iter_child_nodes())


def _checked_concat(concat: Any) -> Any:
    from jinja2 import nodes

    return nodes.Filter(nodes.List(concat.nodes), _CONCAT_FILTER, [], [], None, None, lineno=concat.lineno)


def _bounded_environment(max_chars: int, delimiters: Mapping[str, str]) -> SandboxedEnvironment:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    class BoundedSandbox(SandboxedEnvironment):
        intercepted_binops = frozenset({"**", "*", "+", "%"})

        def call_binop(self, context: Any, operator_: str, left: Any, right: Any) -> Any:
            _check_binop(operator_, left, right, max_chars)
            return super().call_binop(context, operator_, left, right)

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            _check_call_args(args, max_chars)
            _check_call_args(kwargs.values(), max_chars)
            # jinja wraps str.format/format_map in a function whose ``__wrapped__`` is the bound method
            target = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
            if isinstance(target, str):
                _check_text_call(getattr(__obj, "__name__", ""), target, args, max_chars)
            return _check_result(super().call(__context, __obj, *args, **kwargs), max_chars)

    env = BoundedSandbox(
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        **delimiters,  # type: ignore[arg-type]
    )
    env.filters = {name: _bounded_filter(name, fn, max_chars) for name, fn in env.filters.items()}
    env.filters[_LOOP_FILTER] = _bounded_loop

    def bounded_concat(parts: list[Any]) -> str:
        _check_text_call("join", "", (parts,), max_chars)
        return "".join(str(p) for p in parts)

    env.filters[_CONCAT_FILTER] = bounded_concat
    return env


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
