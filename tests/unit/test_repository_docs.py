"""The repository stands on its own: its docs link only inside it, and its code cites no documents
a reader of the repository does not have (design sections, issue numbers, seed documents).

Why a test: both drift silently. A module docstring that says "see DESIGN §4" sends a newcomer to a
file they cannot open; a README link to `../shared/...` is dead for everyone who cloned the repo.
The rule itself belongs in the code comment, and the map of the system in `docs/architecture.md`.

The docs also name files, and a renamed or removed module leaves them pointing at nothing. So every
backticked repository path in `docs/*.md` and `DOCUMENTS_NAMING_PATHS` must exist. What counts
as a path: a backticked text with no whitespace that is not a URL or URI (`://`), an absolute or
home path (`/metrics`, `~/.cache/...`), a flag (`--x/--y`), an assignment (`A=/b`), a glob or a
placeholder (none of `*`, `<`, `>`, `[`, `]`, `{`, `}`, `…`, `@`, `$`, `:`), and which either ends
in `.py`, `.md`, `.yaml`, `.proto`, `.json` or `.toml`, or starts with a top-level directory of the
repository followed by `/` (`federation/rpc`, `tests/unit/`). A pytest node id counts by its file
(`tests/x.py::test_y`). `apps/v1`, `fedspread.io/spread` or `core/reschedule.is_stuck` are not
paths. A path exists when git tracks it (or a file under it) at the repository root, beside the
document, or as the tail of a tracked path: the docs shorten `federation/coordinator/model/loop.py`
to `model/loop.py` or `loop.py` where the context names the directory. Paths a command writes and
git ignores (`bench/results/latest.json`) exist once made; `NAMED_BUT_NOT_TRACKED` lists the few
others, each with its reason.

And each room of the system's map (`docs/architecture.md`, "Layers": the coordinator's table of
rooms, the agent's shared modules) names every module it holds, and nothing that is not there.
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
    r"\bDESIGN\b|§\s?\d|\b[Ii]ssue\s#?\d+|\bseed\s0\d\d\b|\bseed's\b|\bplan item\b|\(plan: [^a-z]"
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


DOCUMENTS_NAMING_PATHS = (
    "README.md", "RELIABILITY.md", "bench/README.md", "deploy/README.md", "examples/README.md",
)
PATH_SUFFIXES = (".py", ".md", ".yaml", ".proto", ".json", ".toml")
BACKTICKED = re.compile(r"`([^`\n]+)`")
NOT_A_PATH = re.compile(r"\s|://|[*<>…\[\]{}=$@~:]")
NAMED_BUT_NOT_TRACKED = {
    "deploy/hub": "an overlay the reader makes beside deploy/coordinator (deploy/README.md shows it)",
    "federation/sandbox/pki.py": "history in docs/decisions.md: where the sandbox's CA lived before",
}


def path_named(text: str, top_level: set[str]) -> str | None:
    """The repository path a backticked text names (file part of a node id), or None if it is none."""
    candidate = text.split("::", 1)[0]
    if NOT_A_PATH.search(candidate) or candidate.startswith(("-", ".", "/")):
        return None
    if candidate.endswith(PATH_SUFFIXES) or ("/" in candidate and candidate.split("/", 1)[0] in top_level):
        return candidate.rstrip("/")
    return None


def git_ignores(path: str) -> bool:
    """Whether git ignores the path (an output a command writes, such as a benchmark's JSON)."""
    return subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0


def unknown_paths(document: str, text: str, files: list[str]) -> list[str]:
    """`document:line: path` for every backticked repository path of the text that names nothing."""
    known = set(files) | {str(parent) for name in files for parent in pathlib.PurePosixPath(name).parents}
    known.discard(".")
    top_level = {name.split("/", 1)[0] for name in files if "/" in name}
    folder = str(pathlib.PurePosixPath(document).parent)
    missing = []
    for number, line in enumerate(text.splitlines(), start=1):
        for named in BACKTICKED.findall(line):
            path = path_named(named, top_level)
            if path is None or path in NAMED_BUT_NOT_TRACKED:
                continue
            beside = f"{folder}/{path}" if folder != "." else path
            if path in known or beside in known or any(k.endswith("/" + path) for k in known):
                continue
            if not git_ignores(path):
                missing.append(f"{document}:{number}: {named}")
    return missing


def test_every_path_the_docs_name_exists() -> None:
    files = tracked_files()
    documents = sorted({*DOCUMENTS_NAMING_PATHS, *(n for n in files if re.fullmatch(r"docs/[^/]+\.md", n))})
    missing = [found for document in documents
               for found in unknown_paths(document, (ROOT / document).read_text(encoding="utf-8"), files)]
    assert not missing, "a doc names a path the repository does not have:\n" + "\n".join(missing)


def test_a_path_that_names_nothing_is_found_and_a_shortened_one_resolves() -> None:
    files = ["federation/coordinator/model/loop.py", "bench/README.md", "bench/admission.py"]
    text = ("`model/loop.py` and `loop.py` and `admission.py` (beside it)\n"
            "`agents/assignment.py`, `federation/coordinator/model/gone.py`, `bench/results/latest.json`\n")
    assert unknown_paths("bench/README.md", text, files) == [
        "bench/README.md:2: agents/assignment.py", "bench/README.md:2: federation/coordinator/model/gone.py",
    ]


@pytest.mark.parametrize(("text", "path"), [
    ("federation/core/placement.py", "federation/core/placement.py"), ("model/loop.py", "model/loop.py"),
    ("tests/unit/", "tests/unit"), ("deploy/coordinator", "deploy/coordinator"),
    ("tests/x.py::test_y", "tests/x.py"), ("webhook.yaml", "webhook.yaml"),
])
def test_the_path_rule_takes_what_names_a_file(text: str, path: str) -> None:
    assert path_named(text, {"federation", "tests", "deploy"}) == path


@pytest.mark.parametrize("text", [
    "apps/v1", "fedspread.io/spread", "https://example.com/a.yaml", "/metrics", "~/.cache/fedspread/",
    "--tls-cert/--tls-key", "deploy/monitoring/*", "federation/cli/<command>.py", "FEDSPREAD_KUBE_BIN=/dir",
    "core/reschedule.is_stuck", ".proto", "kubectl apply -f crds/",
])
def test_the_path_rule_leaves_other_names_alone(text: str) -> None:
    assert path_named(text, {"federation", "tests", "deploy", "crds"}) is None


ARCHITECTURE = ROOT / "docs/architecture.md"


def modules_in(package: pathlib.Path) -> set[str]:
    """The modules (`x.py`) and subpackages (`x/`) of a package, without `__init__.py`."""
    return {child.name for child in package.glob("*.py") if child.name != "__init__.py"} | {
        child.name + "/" for child in package.iterdir() if (child / "__init__.py").is_file()
    }


def layers_section() -> str:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    return text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]


def coordinator_rooms() -> list[tuple[list[str], str]]:
    """(rooms, modules cell) for each row of the table "Inside the coordinator"."""
    table = layers_section().split("Inside the coordinator", 1)[1].split("\n\n", 2)[1]
    rows = []
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows.append((BACKTICKED.findall(cells[0]), cells[1]))
    return rows


def test_every_room_of_the_coordinator_is_a_row_of_its_table() -> None:
    rooms = [room for names, _ in coordinator_rooms() for room in names]
    assert sorted(rooms) == sorted(modules_in(ROOT / "federation/coordinator")), rooms


def test_each_coordinator_room_table_row_names_the_modules_the_room_holds() -> None:
    wrong = []
    for rooms, cell in coordinator_rooms():
        folders = [room for room in rooms if room.endswith("/")]
        if not folders:
            continue
        parts = cell.split(";")
        assert len(parts) == len(folders), f"{rooms}: one ';'-separated list per folder"
        for folder, part in zip(folders, parts, strict=True):
            named = set(BACKTICKED.findall(part))
            held = modules_in(ROOT / "federation/coordinator" / folder)
            if named != held:
                wrong.append(f"{folder}: not in the table {sorted(held - named)}, not in the room "
                             f"{sorted(named - held)}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("folder", ["agents/", "agents/cache/"])
def test_the_agent_s_shared_modules_are_named_where_the_map_lists_them(folder: str) -> None:
    listing = re.search(rf"`{re.escape(folder)}` \(([^)]*)\)", layers_section())
    assert listing, f"docs/architecture.md lists {folder}'s modules as `{folder}` (`a.py`, ...)"
    named = set(BACKTICKED.findall(listing.group(1)))
    held = {name for name in modules_in(ROOT / folder) if name.endswith(".py")} - {"main.py"}
    assert named == held, f"not listed {sorted(held - named)}, not there {sorted(named - held)}"


def test_the_agent_s_parts_are_named() -> None:
    section = layers_section()
    parts = {name for name in modules_in(ROOT / "agents") if name.endswith("/")} - {"cache/"}
    missing = {part for part in parts if f"`{part}`" not in section}
    assert not missing and "`agents/cache/`" in section, missing
