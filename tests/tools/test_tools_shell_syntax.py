"""The shell parser and symbolic word expansion the command policy reads."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_trio.command_check.shell_paths import HERE, NARROW, SYSTEM, breadth
from hermes_trio.command_check.shell_syntax import (
    CmdSub,
    Compound,
    FuncDef,
    Lit,
    ProcSub,
    Script,
    ShellSyntaxError,
    Simple,
    Var,
    Word,
    decode_escapes,
    parse,
)
from hermes_trio.command_check.shell_words import (
    UNKNOWN,
    Segment,
    Value,
    command_name,
    expand,
    literal,
)


def simple_commands(script: Script) -> list[Simple]:
    out: list[Simple] = []
    for item in script.items:
        for pipeline in item.pipelines:
            for command in pipeline.commands:
                if isinstance(command, Simple):
                    out.append(command)
    return out


class Expander:
    """Expansion as the policy sees it when the script sets no variables."""

    def variable(self, var: Var) -> tuple[Segment, ...]:
        if var.name in ("HOME", "PWD") and not var.op:
            return (("home" if var.name == "HOME" else "pwd", ""),)
        return UNKNOWN

    def substitution(self, script: Script, how: str) -> object:
        return None

    def downloads(self, result: object) -> bool:
        return False

    def spend(self, units: int) -> None:
        pass


def values(word: Word) -> list[Value]:
    return expand(word, Expander())


def words_of(text: str) -> list[str | None]:
    [command] = simple_commands(parse(text))
    return [literal(v) for w in command.words for v in values(w)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"\rm -rf x", ["rm", "-rf", "x"]),
        ('"rm" -rf x', ["rm", "-rf", "x"]),
        ("r''m x", ["rm", "x"]),
        (r"r\m x", ["rm", "x"]),
        ("r\\\nm x", ["rm", "x"]),
        (r"$'\x72\155' x", ["rm", "x"]),
        ("$'a\\'b' c", ["a'b", "c"]),
        ('"a b" c', ["a b", "c"]),
        ('"a\\"b"', ['a"b']),
        ('"a\\nb"', ["a\\nb"]),
        ("'a\\nb'", ["a\\nb"]),
        ('$"x y"', ["x y"]),
        ("a''", ["a"]),
        ("''", [""]),
        ("{a,b}c", ["ac", "bc"]),
        ("x{1..3}", ["x1", "x2", "x3"]),
        ("{a..c}", ["a", "b", "c"]),
        ('"{a,b}"', ["{a,b}"]),
        ("{a}", ["{a}"]),
        ("{}", ["{}"]),
        ("a#b #c", ["a#b"]),
        ("echo a;", ["echo", "a"]),
    ],
)
def test_words_after_quote_removal(text: str, expected: list[str]) -> None:
    assert words_of(text) == expected


def test_expansions_stay_symbolic() -> None:
    [command] = simple_commands(parse('x "$HOME" ${HOME}/a ~ ~/b ~bob $PWD "$x" $(ls) $((1))'))
    kinds = [tuple(k for k, _ in v.segments) for w in command.words for v in values(w)]
    assert kinds == [
        ("raw",),
        ("home", "lit"),
        ("home", "raw"),
        ("home",),
        ("home", "raw"),
        ("home",),
        ("pwd",),
        ("unknown", "lit"),
        ("unknown",),
        ("item",),
    ]


def test_structure() -> None:
    script = parse(
        "a && b || c | d & e; f\n"
        "if x; then y; elif z; then w; else v; fi\n"
        "for i in 1 2; do echo $i; done\n"
        "case $k in a|b) one;; *) two;; esac\n"
        "f() { g | f & }\n"
        "while read l; do :; done < <(ls)\n"
        "[[ -n $x && $y == z ]]\n"
        "(( i += 1 ))\n"
    )
    assert len(script.items) == 10
    first = script.items[0]
    assert [len(p.commands) for p in first.pipelines] == [1, 1, 2]
    assert first.background
    kinds = [
        c.kind if isinstance(c, Compound) else type(c).__name__
        for item in script.items[3:]
        for c in item.pipelines[0].commands
    ]
    assert kinds == ["if", "for", "case", "FuncDef", "while", "cond", "arith"]
    loop = script.items[4].pipelines[0].commands[0]
    assert isinstance(loop, Compound)
    assert [w.text for w in loop.words] == ["i", "1", "2"]
    function = script.items[6].pipelines[0].commands[0]
    assert isinstance(function, FuncDef) and function.name == "f"


def test_here_documents() -> None:
    script = parse("cat <<A <<-'B'; echo after\nline $x\nA\n\tliteral $y\n\tB\necho next")
    cat, after, following = simple_commands(script)
    first, second = (r.heredoc for r in cat.redirects)
    assert first is not None and second is not None
    assert first.body is not None and second.body is not None
    assert [type(p) for p in first.body.parts] == [Lit, Var, Lit]
    assert second.body.parts == (Lit("literal $y\n", True),)
    assert [w.text for w in after.words] == ["echo", "after"]
    assert [w.text for w in following.words] == ["echo", "next"]


def test_substitutions_are_parsed_recursively() -> None:
    [command] = simple_commands(parse('echo $(a $(b `c`)) <(d) "$(e)"'))
    nested = [p for w in command.words for p in w.parts if isinstance(p, CmdSub | ProcSub)]
    assert len(nested) == 3
    inner = simple_commands(nested[0].script)[0]
    assert isinstance(inner.words[1].parts[0], CmdSub)


def test_case_patterns_inside_a_command_substitution() -> None:
    script = parse("x=$(case a in a) echo y;; esac); echo $x")
    assert len(script.items) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("echo 'x", "unterminated single quote"),
        ('echo "x', "unterminated double quote"),
        ("echo $(x", "unterminated $("),
        ("echo `x", "unterminated backquote"),
        ("echo ${x", "unterminated ${"),
        ("echo ${}", "bad ${...} substitution"),
        ("if x; then y", "expected 'fi'"),
        ("for x in a; do y", "expected 'done'"),
        ("{ x", "expected '}'"),
        ("x )", "unexpected ')'"),
        ("&& x", "unexpected '&&'"),
        ("fi", "unexpected 'fi'"),
        ("a() ", "expected a command"),
        ("x=$(" * 40, "nested too deeply"),
        ("(" * 40, "nested too deeply"),
    ],
)
def test_syntax_errors_say_what(text: str, message: str) -> None:
    with pytest.raises(ShellSyntaxError, match=re.escape(message)):
        parse(text)


def test_decode_escapes() -> None:
    assert decode_escapes(r"a\tb\x41\101\u00e9\n\\") == "a\tbAA\u00e9\n\\"
    assert decode_escapes(r"\cA\z") == "\x01\\z"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/", SYSTEM),
        ("/usr", SYSTEM),
        ("/usr/", SYSTEM),
        ("/usr/lib", SYSTEM),
        ("/home/alice", SYSTEM),
        ("/var/lib", SYSTEM),
        ("/var/www", NARROW),
        ("/tmp/*", SYSTEM),
        ("/tmp/x", NARROW),
        ("/usr/local/lib/foo", NARROW),
        ("/usr/../", SYSTEM),
        ("//", SYSTEM),
        ("~", SYSTEM),
        ("~/", SYSTEM),
        ("~/*", SYSTEM),
        ("~/.*", SYSTEM),
        ("~/x", NARROW),
        ("~/x/..", SYSTEM),
        ("$HOME/.cache", NARROW),
        ('"$HOME"', SYSTEM),
        ("$x", SYSTEM),
        ('"$x"/*', SYSTEM),
        ("build/$x", NARROW),
        ("$HOME/$x", SYSTEM),
        ("$x-build", NARROW),
        (".", HERE),
        ("./", HERE),
        ("..", HERE),
        ("../..", SYSTEM),
        ("*", HERE),
        ("./*", HERE),
        (".[!.]*", HERE),
        ("*.o", NARROW),
        ("build", NARROW),
        ("build/..", HERE),
        ("../other", NARROW),
        ("$PWD", HERE),
        ("''", NARROW),
    ],
)
def test_breadth(path: str, expected: int) -> None:
    [command] = simple_commands(parse(f"rm {path}"))
    [value] = values(command.words[1])
    assert breadth(value) == expected


@pytest.mark.parametrize(
    ("word", "name"),
    [
        ("rm", "rm"),
        ("/usr/bin/rm", "rm"),
        ("./rm", "rm"),
        ('"$HOME/bin/rm"', "rm"),
        ("$CMD", None),
        ("$(which rm)", "rm"),
        ("$(command -v rm)", "rm"),
        ("$(which $x)", None),
        ("/bin/r?", None),
        ("[", "["),
        ("bin/$x", None),
    ],
)
def test_command_name(word: str, name: str | None) -> None:
    [command] = simple_commands(parse(word))
    [value] = values(command.words[0])
    assert command_name(value) == name


def test_brace_expansion_is_bounded() -> None:
    [command] = simple_commands(parse("x " + "{a,b}" * 20))
    [value] = values(command.words[1])
    assert value.segments == (("unknown", ""),)


@given(st.text(alphabet="abc xyz;|&<>()'\"\\$`{}~\n#=*", max_size=80))
@settings(max_examples=500, deadline=None)
def test_parse_either_succeeds_or_raises_a_syntax_error(text: str) -> None:
    try:
        parse(text)
    except ShellSyntaxError:
        pass
