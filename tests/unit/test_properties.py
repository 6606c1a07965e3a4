"""The --command-config parser reads a properties file as java.util.Properties.load does."""

from __future__ import annotations

import pytest

from consumergroup.cli._properties import PropertiesError, decode, parse


def test_separators_comments_continuations_and_escapes_as_java() -> None:
    text = (
        "a=1\n"
        "b : 2\n"
        "c   3\n"
        "  # a comment ending in a backslash \\\n"
        "d=x, \\\n"
        "    y\\\\\n"  # an escaped backslash does not continue the line
        "e=\\u00e9\\t\\=\\:\n"
        "! another comment\r\n"
        "key\\ with\\ spaces = v  \n"
        "empty\n"
        "last=\\\n"
    )
    assert [(p.line, p.key, p.value) for p in parse(text)] == [
        (1, "a", "1"),
        (2, "b", "2"),
        (3, "c", "3"),
        (5, "d", "x, y\\"),
        (7, "e", "é\t=:"),
        (9, "key with spaces", "v  "),
        (10, "empty", ""),
        (11, "last", ""),
    ]


def test_a_malformed_unicode_escape_is_refused_with_its_line() -> None:
    with pytest.raises(PropertiesError, match=r"line 2: malformed \\uXXXX escape"):
        parse("ok=1\nbad=\\u12g4\n")


def test_utf8_else_latin1_as_java_reads_every_file() -> None:
    assert decode("k=é".encode()) == "k=é"
    assert decode(b"k=caf\xe9") == "k=café"
