"""The console script's launcher (``consumergroup.cli.run``) answers as click's group does.

``run`` writes the top-level help, the bare command's help and ``--version`` itself,
without importing click (``tests/unit/test_import_cost.py`` checks that); here its output
and exit codes are compared with the click group's for the same command lines, at
several terminal widths, and every other command line is shown to reach the group.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from consumergroup.cli import main, run

ANSWERED = [[], ["--help"], ["-h"], ["--version"]]
HANDED_OVER = [["--bogus"], ["-v", "--help"], ["lag", "--help"], ["--list", "--help"]]


def _call(
    entry: Callable[..., object], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one command line. Not click's CliRunner: it forces
    an 80-column width, where a terminal's help is ``COLUMNS`` - 2 wide (at most 78)."""
    with pytest.raises(SystemExit) as stopped:
        entry(argv, prog_name="consumergroup")
    out = capsys.readouterr()
    code = stopped.value.code
    return code if isinstance(code, int) else 0, out.out, out.err


@pytest.mark.parametrize("columns", ["80", "60", "40", "200"])  # 40: click's floor of 50
@pytest.mark.parametrize("argv", ANSWERED, ids=lambda a: " ".join(a) or "no-args")
def test_launcher_answers_as_click_does(
    argv: list[str], columns: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    ours = _call(run, argv, capsys)
    assert ours == _call(main, argv, capsys)
    code, out, err = ours
    assert "Commands:" in (out or err) or out.startswith("consumergroup, version")
    assert code == (2 if not argv else 0)


@pytest.mark.parametrize("argv", HANDED_OVER, ids=" ".join)
def test_launcher_hands_other_command_lines_to_click(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, err = _call(run, argv, capsys)
    assert (code, out, err) == _call(main, argv, capsys)
    assert code == (2 if argv == ["--bogus"] else 0)
    if argv == ["--bogus"]:
        assert "No such option '--bogus'" in err
