from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_trio.wire import DEFAULT_THINK_TAGS, Filtered, ThinkFilter, strip_think_blocks


def run(*chunks: str, tags: tuple[str, ...] = DEFAULT_THINK_TAGS) -> Filtered:
    think = ThinkFilter(tags)
    results = [think.feed(chunk) for chunk in chunks]
    results.append(think.flush())
    return Filtered("".join(r.text for r in results), "".join(r.reasoning for r in results))


@pytest.mark.parametrize("tag", DEFAULT_THINK_TAGS)
def test_each_default_tag(tag: str) -> None:
    assert run(f"Hi <{tag}>plan</{tag}>there") == Filtered("Hi there", "plan")


def test_case_insensitive() -> None:
    assert run("<THINK>a</Think>b<reasoning_scratchpad>c</REASONING_SCRATCHPAD>d") == Filtered(
        "bd", "ac"
    )


def test_plain_text_passes_straight_through() -> None:
    think = ThinkFilter()
    chunk = "no tags here"
    result = think.feed(chunk)
    assert result == Filtered(chunk)
    assert result.text is chunk


def test_reasoning_inside_block_streams_straight_through() -> None:
    think = ThinkFilter()
    assert think.feed("<think>") == Filtered()
    assert think.feed("step one") == Filtered(reasoning="step one")
    assert think.feed("</think>done") == Filtered("done")


def test_tag_split_at_every_position() -> None:
    text = "a<think>b</think>c"
    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1):
            assert run(text[:i], text[i:j], text[j:]) == Filtered("ac", "b"), (i, j)


def test_partial_tag_is_held_then_released_as_text() -> None:
    think = ThinkFilter()
    assert think.feed("x <thi") == Filtered("x ")
    assert think.feed("s is it") == Filtered("<this is it")


def test_lone_lt_at_chunk_end_is_held_one_chunk() -> None:
    think = ThinkFilter()
    assert think.feed("a <") == Filtered("a ")
    assert think.feed(" b") == Filtered("< b")


@pytest.mark.parametrize("chunk", ["a < b", "if x<y:", "<div>hi</div>", "<", "<<", "1 <= 2 <3"])
def test_ordinary_lt_is_not_delayed(chunk: str) -> None:
    think = ThinkFilter()
    result = think.feed(chunk + " end")
    assert result == Filtered(chunk + " end")


def test_close_tag_of_another_name_does_not_close() -> None:
    assert run("<reasoning>a</think>b</reasoning>c") == Filtered("c", "a</think>b")


def test_other_tags_inside_a_block_are_reasoning() -> None:
    assert run("<think>x<thinking>y</thinking>z</think>w") == Filtered(
        "w", "x<thinking>y</thinking>z"
    )


def test_blocks_do_not_nest() -> None:
    assert run("<think>a<think>b</think>c</think>d") == Filtered("cd", "a<think>b")


def test_orphan_closing_tag_is_dropped() -> None:
    assert run("thinking out loud</think>Answer") == Filtered("thinking out loudAnswer", "")


def test_unknown_tags_pass_through() -> None:
    assert run("<b>bold</b> <thinker>x</thinker> <think >y") == Filtered(
        "<b>bold</b> <thinker>x</thinker> <think >y"
    )


def test_unclosed_block_at_flush() -> None:
    think = ThinkFilter()
    assert think.feed("ok <think>abc</thi") == Filtered("ok ", "abc")
    assert think.flush() == Filtered(reasoning="</thi")


def test_held_prefix_outside_is_text_at_flush() -> None:
    think = ThinkFilter()
    assert think.feed("a <reason") == Filtered("a ")
    assert think.flush() == Filtered("<reason")
    assert think.flush() == Filtered()


def test_flush_starts_over_outside() -> None:
    think = ThinkFilter()
    think.feed("<think>a")
    think.flush()
    assert think.feed("b") == Filtered("b")


def test_custom_tags() -> None:
    assert run("<scratch>x</scratch><think>y</think>", tags=("Scratch",)) == Filtered(
        "<think>y</think>", "x"
    )
    assert run("a<b", tags=()) == Filtered("a<b")


@pytest.mark.parametrize("bad", ["", "a b", "<x>", "a/b"])
def test_invalid_tag_names(bad: str) -> None:
    with pytest.raises(ValueError):
        ThinkFilter((bad,))


def test_strip_think_blocks() -> None:
    assert strip_think_blocks("<think>plan</think>\n\nAnswer.  ") == "Answer."
    assert strip_think_blocks("Answer <b>x</b>\n<thinking>trailing, never closed") == (
        "Answer <b>x</b>"
    )
    assert strip_think_blocks("A <Reasoning>r</Reasoning>B <THOUGHT>t</thought>C") == "A B C"
    assert strip_think_blocks("plain") == "plain"
    assert strip_think_blocks("a <thi") == "a <thi"


# -- properties ---------------------------------------------------------------

_TAG_RE = "|".join(re.escape(tag) for tag in DEFAULT_THINK_TAGS)
_OPEN = re.compile(f"<({_TAG_RE})>", re.IGNORECASE)
_ORPHAN_CLOSE = re.compile(f"</({_TAG_RE})>", re.IGNORECASE)

_PIECES = [
    "a",
    "b c",
    " ",
    "\n",
    "<",
    ">",
    "/",
    "</",
    "<t",
    "<th",
    "ink",
    "think",
    "THINK",
    "thinking",
    "reasoning",
    "Thought",
    "REASONING_SCRATCHPAD",
    "<think>",
    "</think>",
    "<Reasoning>",
    "</reasoning>",
    "<thought>",
    "</thought>",
    "<div>",
    "a < b",
    "é",
    "😀",
]
_any_text = st.lists(st.sampled_from(_PIECES), max_size=25).map("".join)


def _splits(text: str) -> st.SearchStrategy[list[str]]:
    return st.lists(st.integers(0, len(text)), max_size=10).map(
        lambda cuts: [
            text[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(text)], strict=True)
        ]
    )


@given(text=_any_text, data=st.data())
def test_any_split_filters_like_the_whole(text: str, data: st.DataObject) -> None:
    chunks = data.draw(_splits(text))
    assert run(*chunks) == run(text)


# A text whose block structure is known: outside segments that open no block,
# then blocks whose inner text contains the marker and any tags except its own
# closing one. The last block may stay unclosed.
_MARK = "¶"
_outside = _any_text.filter(lambda s: not _OPEN.search(s))


@st.composite
def _structured(draw: st.DrawFn) -> tuple[str, str, str]:
    source: list[str] = []
    outside: list[str] = []
    inside: list[str] = []
    for n in range(draw(st.integers(0, 4))):
        segment = draw(_outside)
        source.append(segment)
        outside.append(_ORPHAN_CLOSE.sub("", segment))
        tag = draw(st.sampled_from(DEFAULT_THINK_TAGS))
        casing = draw(st.sampled_from([str.lower, str.upper, str.title]))
        inner = draw(
            st.lists(st.sampled_from([*_PIECES, _MARK, _MARK * 2]), max_size=10)
            .map("".join)
            .filter(lambda s, tag=tag: f"</{tag.lower()}>" not in s.lower())
        )
        source.append(f"<{casing(tag)}>{inner}")
        inside.append(inner)
        if draw(st.booleans()) or n == 0:
            source.append(f"</{casing(tag)}>")
        else:
            break
    else:
        segment = draw(_outside)
        source.append(segment)
        outside.append(_ORPHAN_CLOSE.sub("", segment))
    return "".join(source), "".join(outside), "".join(inside)


@given(case=_structured(), data=st.data())
def test_block_content_never_reaches_text(case: tuple[str, str, str], data: st.DataObject) -> None:
    text, expected_text, expected_reasoning = case
    assert _MARK not in expected_text
    result = run(*data.draw(_splits(text)))
    assert _MARK not in result.text
    assert result == Filtered(expected_text, expected_reasoning)


@given(text=_any_text)
def test_strip_think_blocks_matches_the_stream(text: str) -> None:
    assert strip_think_blocks(text) == run(text).text.strip()
