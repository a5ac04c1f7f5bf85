"""Templates cannot pin a CPU or fill memory: arithmetic, calls, loops and output are bounded."""

from __future__ import annotations

import time

import pytest

from chatclient import JinjaTemplateRenderer
from chatclient.errors import TemplateError
from chatclient.templates import render

HOSTILE = {
    "huge power": "{{ 9**(9**9) }}",
    "huge power via variable": "{% set e = 9**9 %}{{ 7 ** e }}",
    "huge product": "{{ (2**4000) * (2**4000) }}",
    "string repetition": "{{ 'a' * 10**10 }}",
    "list repetition": "{{ [1] * 10**10 }}",
    "huge range": "{% for i in range(10**10) %}x{% endfor %}",
    "range past jinja's own cap": "{% for i in range(200000) %}{% endfor %}",
    "nested loops": "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    "doubling with +": (
        "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}"
    ),
    "doubling with ~": (
        "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
    ),
    "doubling with join": (
        "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = [ns.s, ns.s]|join %}{% endfor %}"
    ),
    "quadratic replace method": "{% set s = 'a' * 5000 %}{{ s.replace('a', s) }}",
    "quadratic replace filter": "{% set s = 'a' * 5000 %}{{ s|replace('a', s) }}",
    "join of repeated big string": "{% set s = 'a' * 9000000 %}{{ ([s] * 100)|join }}",
    "center filter": "{{ 'x'|center(10**9) }}",
    "ljust method": "{{ 'x'.ljust(10**9) }}",
    "printf width argument": "{{ '%*s' % (10**9, 'x') }}",
    "printf literal width": "{{ '%999999999s' % 'x' }}",
    "format literal width": "{{ '{:>999999999}'.format('x') }}",
    "lipsum": "{{ lipsum(10**9) }}",
    "endless macro recursion": "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
    "long output": "{% for i in range(99999) %}{{ 'a' * 1000 }}{% endfor %}",
}


@pytest.mark.parametrize("template", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_template_is_a_template_error_quickly(template: str) -> None:
    start = time.perf_counter()
    with pytest.raises(TemplateError):
        render(template, {"unused": 1})
    assert time.perf_counter() - start < 1.0


def test_limit_message_names_the_setting() -> None:
    with pytest.raises(TemplateError, match="max_output_chars"):
        render("{{ 'a' * 10**10 }}", {"x": 1})
    with pytest.raises(TemplateError, match="max_iterations"):
        render(
            "{% for i in range(9) %}{% for j in range(9) %}{% endfor %}{% endfor %}",
            {"x": 1},
            JinjaTemplateRenderer(max_iterations=20),
        )


def test_output_cap_is_configurable() -> None:
    small = JinjaTemplateRenderer(max_output_chars=10)
    assert small.render("{{ x }}", {"x": "a" * 10}) == "a" * 10
    with pytest.raises(TemplateError, match="max_output_chars=10"):
        small.render("{{ x }}", {"x": "a" * 11})


def test_iteration_budget_counts_all_loops_of_one_rendering() -> None:
    renderer = JinjaTemplateRenderer(max_iterations=6)
    text = "{% for a in x %}{{ a }}{% endfor %}{% for b in x %}{{ b }}{% endfor %}"
    assert renderer.render(text, {"x": [1, 2, 3]}) == "123123"
    with pytest.raises(TemplateError):
        renderer.render(text, {"x": [1, 2, 3, 4]})
    # the budget is per rendering, not per renderer
    assert renderer.render(text, {"x": [1, 2, 3]}) == "123123"


def test_ordinary_templates_still_work() -> None:
    text = (
        "{% for d in docs %}{{ loop.index }}. {{ d.title|upper }} {{ d.n * 2 }} {{ 2**10 }}\n{% endfor %}"
        "{{ 'a' ~ 1 ~ 'b' }} {{ ['x', 'y']|join('-') }} {{ 'ab' * 3 }} {{ '%s=%d' % ('k', 5) }} "
        "{{ '{:>4}'.format('z') }} {{ items|map('string')|join(',') }} {{ 'abc'.replace('b', 'B') }}"
    )
    out = render(text, {"docs": [{"title": "one", "n": 2}, {"title": "two", "n": 3}], "items": [1, 2]})
    assert out == "1. ONE 4 1024\n2. TWO 6 1024\na1b x-y ababab k=5    z 1,2 aBc"


def test_bad_limits_are_rejected() -> None:
    with pytest.raises(ValueError):
        JinjaTemplateRenderer(max_output_chars=0)
    with pytest.raises(ValueError):
        JinjaTemplateRenderer(max_iterations=-1)


@pytest.mark.parametrize("template", ["{{ 1/0 }}", "{{ 'a' * 'b' }}", "{{ 10.0 ** 400 }}"])
def test_python_errors_inside_a_template_are_template_errors(template: str) -> None:
    with pytest.raises(TemplateError, match=r"failed to render|exceeded a limit"):
        render(template, {"x": 1})
