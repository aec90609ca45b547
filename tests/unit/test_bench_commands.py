"""Every `python -m bench...` and `make bench...` command the documents give runs as written.

Why: a reader reproduces a figure by copying its command. Commands drift silently when a module
is renamed or a flag changes (`bench.placement --spreads` once stayed in the docs long after the
tool took `--shape`; `bench.profile_events` stopped importing), and nothing runs the docs. This
test finds every documented command with one regex (`COMMAND`), then runs each as written with
`--help` appended (subprocess, with a timeout): the module must import, every value given before
`--help` must parse (argparse converts and checks each option as it reads it, then prints the help
and exits 0), and every option the command names must be one its help lists (argparse would only
report an unknown one after `--help` has exited). A benchmark is never run here: its size is
irrelevant to whether its command parses.
"""

from __future__ import annotations

import pathlib
import re
import shlex
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", ROOT / "bench" / "README.md", ROOT / "RELIABILITY.md",
               *(ROOT / "docs").glob("*.md")])
COMMAND = re.compile(r"(?:\.venv/bin/)?python -m (?P<module>bench(?:\.\w+)+)(?P<args>[^`#\n]*)"
                     r"|make (?P<target>bench[\w-]*)")
"""A documented command: a bench module with its arguments, or a make target."""
INLINE_CODE = re.compile(r"`([^`]+)`")
FENCE = "```"
HELP_TIMEOUT_S = 30


def snippets(text: str) -> list[str]:
    """The code a document shows: each line of a fenced block, and each inline code span (a span
    broken over lines is joined, as the reader would type it)."""
    found: list[str] = []
    prose: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(FENCE):
            fenced = not fenced
            continue
        if fenced:
            found.append(line)
        else:
            prose.append(line)
    found += [" ".join(span.split()) for span in INLINE_CODE.findall("\n".join(prose))]
    return found


def documented() -> dict[tuple[str, ...], list[str]]:
    """Every documented command as its argv after `python -m` (or `make`), with where it appears."""
    commands: dict[tuple[str, ...], list[str]] = {}
    for path in DOCS:
        for snippet in snippets(path.read_text()):
            for match in COMMAND.finditer(snippet):
                if match["target"]:
                    argv: tuple[str, ...] = ("make", match["target"])
                else:
                    args = match["args"].strip().removesuffix("[--check]").strip()
                    argv = (match["module"], *shlex.split(args))
                commands.setdefault(argv, []).append(str(path.relative_to(ROOT)))
    return commands


COMMANDS = documented()


def test_the_documents_give_bench_commands_to_check() -> None:
    modules = {argv[0] for argv in COMMANDS}
    assert {"bench.run", "bench.readme", "bench.placement", "make"} <= modules, modules


@pytest.mark.parametrize("argv", sorted(a for a in COMMANDS if a[0] != "make"), ids=" ".join)
def test_a_documented_bench_command_parses_as_written(argv: tuple[str, ...]) -> None:
    module, *args = argv
    ran = subprocess.run([sys.executable, "-m", module, *args, "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=HELP_TIMEOUT_S, check=False)
    where = ", ".join(sorted(set(COMMANDS[argv])))
    assert ran.returncode == 0, (
        f"`python -m {' '.join(argv)}` ({where}) does not parse:\n{ran.stderr[-2000:]}")
    for option in (a.split("=", 1)[0] for a in args if a.startswith("--")):
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", ran.stdout), (
            f"`python -m {' '.join(argv)}` ({where}): {module} has no option {option}")


@pytest.mark.parametrize("target", sorted({a[1] for a in COMMANDS if a[0] == "make"}))
def test_a_documented_make_target_exists(target: str) -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(rf"^{re.escape(target)}:", makefile, re.MULTILINE), f"Makefile has no target {target}"


def test_the_extraction_sees_commands_as_a_reader_copies_them() -> None:
    text = "\n".join([
        "Run `python -m bench.placement --shape '{\"spreads\": 10,",
        "  \"clusters\": 5}'` or:", FENCE + "sh",
        ".venv/bin/python -m bench.run --quick --only placement inventory   # a subset",
        "make bench-quick", FENCE, "and `make bench`."])
    found = [m.group(0).strip() for s in snippets(text) for m in COMMAND.finditer(s)]
    assert found == [".venv/bin/python -m bench.run --quick --only placement inventory",
                     "make bench-quick",
                     "python -m bench.placement --shape '{\"spreads\": 10, \"clusters\": 5}'",
                     "make bench"]
