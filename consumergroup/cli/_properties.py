"""Java properties files, read as ``java.util.Properties.load`` reads them.

Kafka's tools take their ``--command-config`` as such a file, so the same file must
mean the same here: ``key=value``, ``key: value`` and ``key value`` lines, ``#`` and
``!`` comments, a backslash at the end of a line continuing it (the next line's leading
white space dropped), and the escapes ``\\t \\n \\r \\f \\uXXXX`` (a backslash before any
other character stands for that character, ``\\=``, ``\\:``, ``\\ `` and ``\\\\``
included).

Java reads the bytes as ISO-8859-1. Files are mostly written in UTF-8 nowadays, so
UTF-8 is tried first, and a file that is not UTF-8 is read as ISO-8859-1, as Java does.
"""

from __future__ import annotations

import re

from .._dataclass import dataclass

_WHITE = " \t\f"
_SEPARATORS = "=:"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """A line Java's parser would refuse too (a malformed ``\\uXXXX`` escape)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass(frozen=True, slots=True)
class Property:
    """One ``key``/``value`` pair and the line its logical line starts on."""

    line: int
    key: str
    value: str


def decode(data: bytes) -> str:
    """The file's text: UTF-8, else ISO-8859-1 (what Java reads every file as)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line): continuations joined, comments and blank lines
    dropped. Java's natural lines end at \\n, \\r or \\r\\n."""
    out: list[tuple[int, str]] = []
    natural = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(natural, 1):
        line = raw.lstrip(_WHITE)
        if not pending:
            if not line or line[0] in "#!":
                continue  # a comment does not continue, whatever it ends with
            start = number
        # An odd number of trailing backslashes continues the line (an even one is escaped).
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending.append(line[:-1])
            continue
        pending.append(line)
        out.append((start, "".join(pending)))
        pending = []
    if pending:  # a continuation at the end of the file: Java keeps what it has
        out.append((start, "".join(pending)))
    return out


def _unescape(text: str, line: int) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 == len(text):
            out.append(ch if ch != "\\" else "")
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesError(line, f"malformed \\uXXXX escape: {text[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Key and raw value: the key ends at the first unescaped ``=``, ``:`` or white space;
    white space, then one ``=`` or ``:``, then white space separate it from the value."""
    i = 0
    while i < len(line) and line[i] not in _SEPARATORS + _WHITE:
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:].lstrip(_WHITE)
    if rest[:1] and rest[0] in _SEPARATORS:
        rest = rest[1:].lstrip(_WHITE)
    return key, rest


def parse(text: str) -> list[Property]:
    """Every property of ``text`` in file order (a later duplicate wins when made a dict)."""
    props: list[Property] = []
    for number, line in _logical_lines(text):
        key, value = _split(line)
        props.append(Property(number, _unescape(key, number), _unescape(value, number)))
    return props


class JaasError(ValueError):
    """A ``sasl.jaas.config`` value that is not one JAAS login module entry."""


@dataclass(frozen=True, slots=True)
class JaasEntry:
    """One login module entry of ``sasl.jaas.config``: its class and its options."""

    module: str
    options: dict[str, str]

    @property
    def name(self) -> str:
        """The class's simple name (``ScramLoginModule``)."""
        return self.module.rpartition(".")[2]


_JAAS_HEAD = re.compile(
    r"\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)"
)
_JAAS_OPTION = re.compile(
    r"""\s*(?P<key>[\w.$-]+)\s*=\s*(?:"(?P<dq>(?:[^"\\]|\\.)*)"|'(?P<sq>(?:[^'\\]|\\.)*)'|(?P<word>[^\s;"']+))"""
)
_JAVA_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def parse_jaas(text: str) -> JaasEntry:
    """``Module flag key="value" ...;`` read as Kafka's ``JaasConfig`` reads it (Java's
    ``StreamTokenizer``): values in double or single quotes (with its escapes) or bare."""
    head = _JAAS_HEAD.match(text)
    if head is None:
        raise JaasError(
            "expected 'LoginModuleClass required key=\"value\" ...;' (e.g. "
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="alice" password="...";)'
        )
    options: dict[str, str] = {}
    pos = head.end()
    while (option := _JAAS_OPTION.match(text, pos)) is not None:
        quoted = option["dq"] if option["dq"] is not None else option["sq"]
        if quoted is None:
            options[option["key"]] = option["word"]
        else:
            options[option["key"]] = re.sub(
                r"\\(.)", lambda m: _JAVA_ESCAPES.get(m[1], m[1]), quoted, flags=re.S
            )
        pos = option.end()
    rest = text[pos:].strip()
    if rest not in (";", ""):
        raise JaasError(f"cannot read {rest[:40]!r}: expected key=\"value\" options, then ';'")
    return JaasEntry(head["module"], options)
