"""The repository stands on its own: its docs link only inside it, and its code cites no documents
a reader of the repository does not have (design sections, issue numbers, seed documents).

Why a test: both drift silently. A module docstring that says "see DESIGN §4" sends a newcomer to a
file they cannot open; a README link to `../shared/...` is dead for everyone who cloned the repo.
The rule itself belongs in the code comment, and the map of the system in `docs/architecture.md`.
"""

from __future__ import annotations

import pathlib
import re
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Where history may be cited ("issue 8 added mTLS"): the docs, the README and the tests.
CITING_ALLOWED = ("docs/", "tests/", "README.md", "RELIABILITY.md")
OUTSIDE_CITATION = re.compile(
    r"\bDESIGN\b|§\s?\d|\b[Ii]ssue\s#?\d+|\bseed\s0\d\d\b|\bseed's\b|\bplan item\b|\(plan: "
    r"|shared/(DESIGN|seeds|ANCHORS)"
)
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def tracked_files() -> list[str]:
    """Every file git tracks in the repository (the stand-alone contents a user clones)."""
    listing = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [line for line in listing.stdout.splitlines() if (ROOT / line).is_file()]


def test_the_git_listing_is_not_empty() -> None:
    files = tracked_files()
    assert "README.md" in files and "docs/architecture.md" in files, files[:20]


def code_citations() -> list[str]:
    """`path:line: text` for every line outside the docs and tests that cites an outside document."""
    found = []
    for name in tracked_files():
        if name.startswith(CITING_ALLOWED) or name.endswith((".md", ".json")) or "_pb2" in name:
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if OUTSIDE_CITATION.search(line):
                found.append(f"{name}:{number}: {line.strip()}")
    return found


def test_code_cites_no_design_sections_issues_or_seeds() -> None:
    found = code_citations()
    assert not found, "state the rule, not a document outside the repository:\n" + "\n".join(found)


def markdown_links_leaving_the_repository() -> list[str]:
    """`path: target` for every Markdown link that points outside the repository or at nothing."""
    bad = []
    for name in tracked_files():
        if not name.endswith(".md"):
            continue
        source = ROOT / name
        for target in MARKDOWN_LINK.findall(source.read_text(encoding="utf-8")):
            if target.startswith("#"):
                continue
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:, file: ...
                bad.append(f"{name}: {target} (outside the repository)")
                continue
            resolved = (source.parent / target.split("#", 1)[0]).resolve()
            if not resolved.is_relative_to(ROOT):
                bad.append(f"{name}: {target} (outside the repository)")
            elif not resolved.exists():
                bad.append(f"{name}: {target} (no such file)")
    return bad


def test_markdown_links_stay_inside_the_repository_and_resolve() -> None:
    bad = markdown_links_leaving_the_repository()
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("line", [
    "Timed from the condition (DESIGN §4).", "see §3 Stable", "mTLS everywhere (issue 8).",
    "Kruise's design (seed 001 §3.1)", "the seed's webhook", 'the model (plan: "world").',
])
def test_the_citation_pattern_catches_what_it_must(line: str) -> None:
    assert OUTSIDE_CITATION.search(line)


@pytest.mark.parametrize("line", [
    "rng = random.Random(seed)", "the world is seeded from the hub status", "an issued certificate",
])
def test_the_citation_pattern_leaves_ordinary_words_alone(line: str) -> None:
    assert not OUTSIDE_CITATION.search(line)
