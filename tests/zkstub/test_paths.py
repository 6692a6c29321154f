import pytest

from zkstub import BadArgumentsError
from zkstub._paths import join_chroot, split_connect_string, strip_chroot, validate_path


@pytest.mark.parametrize(
    "path", ["/", "/a", "/a/b", "/a.b", "/..a", "/a/.b", "/\u00e9", "/\ufeff", "/\u2028"]
)
def test_valid_paths(path):
    assert validate_path(path) == path


@pytest.mark.parametrize(
    "path",
    [
        "",
        "a",
        "/a/",
        "//a",
        "/a//b",
        "/.",
        "/a/..",
        "/a/./b",
        "/a\u0000",
        "/a\u0001",
        "/a\u001f",
        "/a\u007f",
        "/a\u009f",
        "/a\ud800",
        "/a\uf8ff",
        "/a\ufff0",
        "/a\uffff",
        "/a\U0001f600",  # a surrogate pair in Java
    ],
)
def test_invalid_paths(path):
    with pytest.raises(BadArgumentsError):
        validate_path(path)


def test_sequential_path_may_end_in_slash():
    assert validate_path("/a/", sequential=True) == "/a/"


def test_chroot_join_and_strip():
    assert join_chroot("", "/a") == "/a"
    assert join_chroot("/kafka", "/") == "/kafka"
    assert join_chroot("/kafka", "/a") == "/kafka/a"
    assert strip_chroot("/kafka", "/kafka") == "/"
    assert strip_chroot("/kafka", "/kafka/a/b") == "/a/b"


def test_connect_string():
    assert split_connect_string("h1:1,h2:2/kafka") == ([("h1", 1), ("h2", 2)], "/kafka")
    assert split_connect_string("h:2181") == ([("h", 2181)], "")
    with pytest.raises(BadArgumentsError):
        split_connect_string("nohost")
