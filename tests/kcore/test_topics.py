import pytest

from kcore.errors import InvalidTopicError
from kcore.topics import has_collision, has_collision_chars, is_internal, validate_topic_name


@pytest.mark.parametrize(
    "name", ["valid", "TOPIC", "nAmEs", "ar6", "VaL1d", "_0-9_.", "...", "a" * 249]
)
def test_legal_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "empty"),
        (".", r'"\." or "\.\."'),
        ("..", r'"\." or "\.\."'),
        ("a" * 250, "longer than 249"),
        ("foo:bar", "character other than"),
        ("foo=bar", "character other than"),
        ("foo bar", "character other than"),
        ("tøpic", "character other than"),
        ("foo/bar", "character other than"),
        ("foo\n", "character other than"),
    ],
)
def test_illegal_names_say_why(name: str, reason: str) -> None:
    with pytest.raises(InvalidTopicError, match=reason):
        validate_topic_name(name)


def test_collision_chars() -> None:
    assert has_collision_chars("a.b")
    assert has_collision_chars("a_b")
    assert not has_collision_chars("a-b")
    assert has_collision("a.b", "a_b")
    assert not has_collision("a.b", "a-b")


def test_internal_topics() -> None:
    assert is_internal("__consumer_offsets")
    assert not is_internal("consumer_offsets")
