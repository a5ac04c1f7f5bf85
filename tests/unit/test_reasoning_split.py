"""The <think> splitter of chatclient.models.reasoning: whole texts and streams cut anywhere."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatclient.models.reasoning import ThinkSplitter, split_think


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>a</think>b", ("a", "b")),
        ("  \n<think>\nplan\n</think>\n\nAnswer", ("\nplan\n", "Answer")),
        ("<think>one</think><think>two</think>done", ("onetwo", "done")),
        ("<thinking>x</thinking>y", ("x", "y")),
        ("<think>cut off by max_tokens", ("cut off by max_tokens", "")),
        ("<think></think>empty thought", ("", "empty thought")),
        ("No tags here.", ("", "No tags here.")),
        ("  leading space kept", ("", "  leading space kept")),
        ("Answer first <think>x</think>", ("", "Answer first <think>x</think>")),  # only a LEADING block
        ("<b>bold</b>", ("", "<b>bold</b>")),
        ("<thin", ("", "<thin")),  # a would-be tag that never completes is answer text
        ("", ("", "")),
    ],
)
def test_whole_text(text: str, expected: tuple[str, str]) -> None:
    assert split_think(text) == expected


def test_only_the_named_tags_count() -> None:
    assert split_think("<reasoning>r</reasoning>a", tags=("reasoning",)) == ("r", "a")
    assert split_think("<think>t</think>a", tags=("reasoning",)) == ("", "<think>t</think>a")
    with pytest.raises(ValueError, match="at least one tag"):
        ThinkSplitter(())


def streamed(pieces: list[str]) -> tuple[str, str]:
    s = ThinkSplitter()
    out = [p for piece in pieces for p in s.feed(piece)] + s.finish()
    return "".join(t for k, t in out if k == "reasoning"), "".join(t for k, t in out if k == "text")


SAMPLES = [
    "<think>\nLet me see: 2+2=4.\n</think>\n\n**4**",
    " <thinking>a<b</thinking>x</think>",
    "<think>x</thi",
    "plain <think> answer",
    "<think>é☀️</think>ü",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_every_two_and_three_way_cut_matches_the_whole_text(text: str) -> None:
    whole = split_think(text)
    for i in range(len(text) + 1):
        assert streamed([text[:i], text[i:]]) == whole, i
        for j in range(i, len(text) + 1):
            assert streamed([text[:i], text[i:j], text[j:]]) == whole, (i, j)


@settings(max_examples=50, deadline=None)
@given(
    body=st.text(alphabet="<>/thinkgab \n", max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=8),
)
def test_random_texts_and_cuts_match_the_whole_text(body: str, cuts: list[int]) -> None:
    for text in (body, "<think>" + body, "<think>" + body + "</think>ok"):
        points = sorted({min(c, len(text)) for c in cuts})
        pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
        assert streamed(pieces) == split_think(text)


def test_reasoning_streams_as_it_comes_and_answer_is_not_delayed() -> None:
    s = ThinkSplitter()
    assert s.feed("<think>step one") == [("reasoning", "step one")]
    assert s.in_reasoning
    assert s.feed(" and two</") == [("reasoning", " and two")]  # "</" is held: it may close the block
    assert s.feed("think>Hi") == [("text", "Hi")]
    assert s.feed(" there") == [("text", " there")]
    assert s.finish() == []


def test_long_streams_split_in_linear_time() -> None:
    text = "<think>" + "reasoning words " * 4_000 + "</think>" + "answer words " * 4_000
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    start = time.perf_counter()
    thought, answer = streamed(pieces)
    elapsed = time.perf_counter() - start
    assert thought == "reasoning words " * 4_000 and answer == "answer words " * 4_000
    assert elapsed < 2.0, elapsed
