import pytest

from kcore._fetcher_id import fetcher_id, java_string_hash


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -(2**31)),
        ("Hello", 69609650),
        ("hello world", 1794106052),  # overflows 32 bits on the way
        ("\U0001f600", 55357 * 31 + 56832),  # one code point, two UTF-16 units
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_fetcher_id_matches_java_arithmetic() -> None:
    # 31 * 99162322 + 1 = 3074031983 overflows to -1220935313 in Java.
    assert fetcher_id("hello", 1, 7) == 1220935313 % 7
    assert fetcher_id("a", 0, 4) == (31 * 97) % 4


def test_integer_min_value_maps_to_fetcher_zero() -> None:
    # 31 * Integer.MIN_VALUE wraps to Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0.
    assert fetcher_id("polygenelubricants", 0, 3) == 0


def test_one_fetcher_takes_everything() -> None:
    assert {fetcher_id(f"t{i}", p, 1) for i in range(20) for p in range(5)} == {0}


def test_fetcher_ids_stay_in_range() -> None:
    ids = {fetcher_id(f"t{i}", p, 4) for i in range(20) for p in range(5)}
    assert ids == {0, 1, 2, 3}


def test_nonpositive_fetcher_count_is_rejected() -> None:
    with pytest.raises(ValueError, match="0"):
        fetcher_id("t", 0, 0)
