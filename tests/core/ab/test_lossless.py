"""compare_outputs: the one comparison of two outputs (token ids when both have them, else text)."""

from __future__ import annotations

from dataclasses import dataclass

from mtpwatch.core.ab.lossless import compare_outputs, first_difference


@dataclass(frozen=True)
class Out:
    text: str
    token_ids: tuple[int, ...] | None = None


def test_first_difference_counts_a_length_mismatch() -> None:
    assert first_difference("abc", "abc") is None
    assert first_difference("abc", "abd") == 2
    assert first_difference((1, 2), (1, 2, 3)) == 2


def test_token_ids_win_when_both_have_them() -> None:
    same_ids = compare_outputs(Out("hello", (1, 2, 3)), Out("hellO", (1, 2, 3)))
    assert same_ids.compared == "token_ids" and same_ids.identical
    assert same_ids.token_index is None and same_ids.char_index == 4  # the text is still located
    differ = compare_outputs(Out("ab", (1, 2, 3)), Out("ab", (1, 9, 3)))
    assert differ.compared == "token_ids" and not differ.identical and differ.token_index == 1
    longer = compare_outputs(Out("ab", (1, 2)), Out("abc", (1, 2, 3)))
    assert longer.token_index == 2 and longer.char_index == 2


def test_text_when_either_lacks_token_ids() -> None:
    same = compare_outputs(Out("same", (1,)), Out("same"))
    assert same.compared == "text" and same.identical and same.token_index is None
    differ = compare_outputs(Out("cat"), Out("car"))
    assert differ.compared == "text" and not differ.identical and differ.char_index == 2
