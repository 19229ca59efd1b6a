"""How far a path reaches, judged where the command runs."""

from __future__ import annotations

import pytest

from hermes_trio.command_check.shell_paths import (
    HERE,
    MAX_DIRS,
    NARROW,
    START,
    SYSTEM,
    Place,
    breadth,
    merge_dirs,
    normalize_dir,
)
from hermes_trio.command_check.shell_words import UNKNOWN, Segment, Value


def value(*segments: Segment) -> Value:
    return Value(tuple(segments))


def raw(text: str) -> Value:
    return value(("raw", text))


@pytest.mark.parametrize(
    ("path", "start", "expected"),
    [
        ("usr", "/", SYSTEM),
        ("alice", "/home", SYSTEM),
        ("lib", "/usr", SYSTEM),
        ("local/lib/x", "/usr", NARROW),
        ("build", "/srv/app", NARROW),
        (".", "/srv/app", HERE),
        ("*", "/srv/app", HERE),
        ("..", "/srv/app", SYSTEM),
        ("..", "/srv/app/sub", HERE),
        ("../..", "/srv/a/b/c", HERE),
        ("/srv/app", "/srv/app", HERE),
        ("/srv", "/srv/app", SYSTEM),
        ("/srv/app/build", "/srv/app", NARROW),
        ("*/build", "/srv/app", NARROW),
        ("*/*", "/srv/app", HERE),
        ("build", None, NARROW),
        (".", None, HERE),
        ("../..", None, SYSTEM),
    ],
)
def test_relative_paths_from_the_start_directory(
    path: str, start: str | None, expected: int
) -> None:
    assert breadth(raw(path), Place(start=start)) == expected


def test_each_directory_the_command_may_be_in_counts() -> None:
    usr = raw("usr")
    assert breadth(usr, Place((START,), "/srv/app")) == NARROW
    assert breadth(usr, Place((START, (("lit", "/"),)), "/srv/app")) == SYSTEM
    assert breadth(usr, Place((UNKNOWN,), "/srv/app")) == SYSTEM
    # $PWD and $(pwd) are the directory the command is in.
    pwd_usr = value(("pwd", ""), ("raw", "/usr"))
    assert breadth(pwd_usr, Place(((("lit", "/"),),), None)) == SYSTEM
    assert breadth(pwd_usr, Place()) == NARROW


@pytest.mark.parametrize(
    ("segments", "expected"),
    [
        # The user's environment: a specific name under it is narrow...
        ((("env", ""), ("lit", "/build")), NARROW),
        ((("env", ""), ("lit", "/out/tmp")), NARROW),
        # ...but not the directory itself, a system tree's name, or above it.
        ((("env", ""),), SYSTEM),
        ((("env", ""), ("lit", "/usr")), SYSTEM),
        ((("env", ""), ("lit", "/lib")), SYSTEM),
        ((("env", ""), ("lit", "/home/alice")), SYSTEM),
        ((("env", ""), ("lit", "/build/..")), SYSTEM),
        ((("env", ""), ("raw", "/*")), SYSTEM),
        # The checkout: itself is the working tree, below it narrow.
        ((("top", ""),), HERE),
        ((("top", ""), ("lit", "/build")), NARROW),
        ((("top", ""), ("lit", "/..")), SYSTEM),
        # A fresh temporary directory and what is in it.
        ((("item", ""),), NARROW),
        ((("item", ""), ("raw", "/*")), NARROW),
        ((("item", ""), ("raw", "/..")), SYSTEM),
        # Anything else an expansion decides.
        ((("unknown", ""), ("lit", "/build")), SYSTEM),
    ],
)
def test_expansions(segments: tuple[Segment, ...], expected: int) -> None:
    assert breadth(value(*segments), Place(start="/srv/app")) == expected


@pytest.mark.parametrize(
    ("segments", "expected"),
    [
        ((("lit", "/usr/./local/../lib/"),), (("lit", "/usr/lib"),)),
        ((("lit", "/.."),), (("lit", "/"),)),
        ((("start", ""), ("lit", "/a/../b")), (("start", ""), ("lit", "/b"))),
        ((("start", ""), ("lit", "/../..")), (("start", ""), ("lit", "/../.."))),
        ((("home", ""), ("lit", "/x")), (("home", ""), ("lit", "/x"))),
        ((("unknown", ""), ("lit", "/x")), UNKNOWN),
        ((("lit", "/a/"), ("unknown", "")), UNKNOWN),
    ],
)
def test_normalize_dir(segments: tuple[Segment, ...], expected: tuple[Segment, ...]) -> None:
    assert normalize_dir(segments) == expected


def test_merge_dirs_keeps_each_once_and_gives_up_past_the_limit() -> None:
    a, b = (("lit", "/a"),), (("lit", "/b"),)
    assert merge_dirs((a, b), (b,)) == (a, b)
    many = tuple((("lit", f"/{i}"),) for i in range(MAX_DIRS + 1))
    assert merge_dirs(many) == (UNKNOWN,)
