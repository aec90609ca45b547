"""The sandbox build's progress: events rendered as log lines, and the measures behind them.

Why: `fedspread sandbox build` runs for minutes; in a CI log it must say which step runs, how far
it is and for how long, in few appended lines (never carriage returns), and on a terminal show the
same live. The line rendering is pure (events and their times in, lines out) and tested so; the
measures are tested on the real output of apt-get and of the Kubernetes build (recorded), and the
compile step runs a real `make` on a Makefile that prints what the Kubernetes build prints.
"""

from __future__ import annotations

import io
import itertools
import pathlib

import rich.console

from federation.cli import build_view
from federation.sandbox import build, meters, progress

# `apt-get -qq --print-uris source --download-only kubernetes` on Debian 12 (recorded; hashes cut)
POOL = "http://deb.debian.org/debian/pool/main/k/kubernetes"
LISTING = "".join(f"'{POOL}/{quoted}' {name} {size} SHA256:{digest}\n" for quoted, name, size, digest in (
    ("kubernetes_1.20.5%2breally1.20.2-1.1%2bdeb12u1.dsc", "kubernetes_1.20.5+really1.20.2-1.1+deb12u1.dsc",
     1973, "19fa1da5aefcef67"),
    ("kubernetes_1.20.5%2breally1.20.2.orig.tar.gz", "kubernetes_1.20.5+really1.20.2.orig.tar.gz",
     34428927, "b83c0780efb182d9"),
    ("kubernetes_1.20.5%2breally1.20.2-1.1%2bdeb12u1.debian.tar.xz",
     "kubernetes_1.20.5+really1.20.2-1.1+deb12u1.debian.tar.xz", 21300, "9b6e5fd41769d2b5"),
))
# the start and the end of a real build.log, with the package lines GOFLAGS=-v adds
BUILD_LOG = """\
make[1]: Entering directory '/root/.cache/fedspread/fedspread-build-9nbynh_j/kubernetes'
+++ [1124 04:25:38] Building go targets for linux/amd64:
    ./vendor/k8s.io/code-generator/cmd/prerelease-lifecycle-gen
k8s.io/kubernetes/vendor/k8s.io/klog/v2
k8s.io/kubernetes/vendor/k8s.io/gengo/types
+++ [1124 04:26:40] Building go targets for linux/amd64:
    cmd/kube-apiserver
    cmd/kube-controller-manager
    cmd/kube-scheduler
runtime
k8s.io/kubernetes/vendor/github.com/spf13/pflag
k8s.io/kubernetes/cmd/kube-apiserver/app
make[1]: Leaving directory '/root/.cache/fedspread/fedspread-build-9nbynh_j/kubernetes'
"""


def render(events: list[tuple[float, progress.Event]], *, interval: float = 30.0) -> list[str]:
    renderer = progress.LineRenderer(interval=interval)
    return [line for now, event in events for line in renderer.render(event, now=now)]


# --- the line rendering ---------------------------------------------------------------------------


def test_a_download_step_is_a_few_appended_lines() -> None:
    total = 34_452_200
    lines = render([
        (0.0, progress.Step(index=1, total=4, title="downloading the kubernetes source package")),
        (2.0, progress.Advance(1_000_000, total=total, unit="bytes", detail="0 of 3 files")),
        (4.0, progress.Advance(9_000_000, total=total, unit="bytes", detail="1 of 3 files")),
        (31.0, progress.Advance(19_000_000, total=total, unit="bytes", detail="1 of 3 files")),
        (32.5, progress.Advance(20_000_000, total=total, unit="bytes", detail="1 of 3 files")),
        (33.0, progress.Advance(total, total=total, unit="bytes", detail="3 of 3 files")),
        (33.5, progress.Advance(total, total=total, unit="bytes", detail="3 of 3 files")),
        (34.0, progress.StepDone("kubernetes 1.20.5")),
    ])
    assert lines == [
        "[1/4] downloading the kubernetes source package",
        "    1.0 of 34.5 MB, 0 of 3 files (2s)",
        "    20.0 of 34.5 MB, 1 of 3 files (32s)",
        "    34.5 of 34.5 MB, 3 of 3 files (33s)",
        "[1/4] downloading the kubernetes source package: done in 34s (34.5 of 34.5 MB, kubernetes 1.20.5)",
    ]


def test_a_long_step_without_a_total_says_how_far_every_interval() -> None:
    events: list[tuple[float, progress.Event]] = [(0.0, progress.Step(3, 4, "compiling"))]
    events += [(float(t), progress.Advance(t * 3, unit="Go packages compiled",
                                           detail="building kube-apiserver")) for t in range(2, 330, 2)]
    events += [(330.0, progress.StepDone())]
    lines = render(events)
    assert lines[0] == "[3/4] compiling"
    assert lines[1] == "    6 Go packages compiled, building kube-apiserver (2s)"
    assert lines[2] == "    96 Go packages compiled, building kube-apiserver (32s)"
    assert len(lines) == 1 + 11 + 1  # the step, progress at 2 s and every 30 s after it, the end
    assert lines[-1] == "[3/4] compiling: done in 5m30s (984 Go packages compiled)"
    assert not any("\r" in line for line in lines)


def test_notes_steps_without_progress_and_ends_outside_a_step() -> None:
    lines = render([
        (0.0, progress.Note("before anything")),
        (0.0, progress.Step(1, 1, "fetching kubectl")),
        (1.0, progress.Note("kubernetes-client=1 is no longer in the archive")),
        (75.0, progress.StepDone("kubectl 1.20 cached in /c")),
        (75.0, progress.StepDone("")),
        (76.0, progress.StepDone("outside")),
    ])
    assert lines == ["before anything", "[1/1] fetching kubectl",
                     "    kubernetes-client=1 is no longer in the archive",
                     "[1/1] fetching kubectl: done in 1m15s (kubectl 1.20 cached in /c)", "outside"]


def test_the_sink_numbers_planned_steps_and_is_a_report_callable() -> None:
    written: list[str] = []
    clock = itertools.count()
    sink = progress.Lines(written.append, clock=lambda: float(next(clock)))
    sink.plan(2)
    sink.step("one")
    sink.done()
    sink("a plain report line")
    sink.step("two")
    sink.done()
    sink.step("three, unplanned")
    assert written == ["[1/2] one", "[1/2] one: done in 1s", "a plain report line", "[2/2] two",
                       "[2/2] two: done in 1s", "[3/3] three, unplanned"]
    assert progress.sink_of(sink) is sink
    assert isinstance(progress.sink_of(written.append), progress.Lines)


def test_durations_and_amounts() -> None:
    assert [progress.duration(s) for s in (0, 59.9, 60, 302, 3600)] == [
        "0s", "59s", "1m00s", "5m02s", "60m00s"]
    assert progress.amount(1_500_000, None, "bytes") == "1.5 MB"
    assert progress.amount(2, 3, "files") == "2 of 3 files"
    assert progress.amount(7, None, "") == "7"


# --- the measures ---------------------------------------------------------------------------------


def test_the_print_uris_listing_gives_names_and_sizes() -> None:
    planned = meters.planned_downloads(LISTING + "E: some warning\n\n")
    assert [d.size for d in planned] == [1973, 34428927, 21300]
    assert planned[1].name == "kubernetes_1.20.5+really1.20.2.orig.tar.gz"


def test_downloaded_bytes_and_complete_files(tmp_path: pathlib.Path) -> None:
    planned = [meters.Download("a.dsc", 3), meters.Download("b.tar.gz", 10)]
    (tmp_path / "a.dsc").write_bytes(b"abc")
    (tmp_path / "partial").mkdir()
    (tmp_path / "partial" / "b.tar.gz").write_bytes(b"12345")
    assert meters.bytes_under(tmp_path) == 8
    assert meters.files_complete(tmp_path, planned) == 1
    assert meters.bytes_under(tmp_path / "absent") == 0


def test_the_build_log_gives_targets_and_packages_even_when_read_in_pieces(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "build.log"
    log.write_text("")
    tail, reader = meters.tail_file(log), meters.GoBuildLog()
    cut = BUILD_LOG.index("k8s.io/kubernetes/vendor/k8s.io/gengo") + 10  # in the middle of a line
    with log.open("a") as stream:
        stream.write(BUILD_LOG[:cut])
        stream.flush()
        reader.feed(next(tail))
        assert (reader.packages, reader.building) == (1, "building prerelease-lifecycle-gen")
        stream.write(BUILD_LOG[cut:])
        stream.flush()
        reader.feed(next(tail))
    assert reader.packages == 5
    assert reader.building == "building kube-apiserver, kube-controller-manager, kube-scheduler"
    assert next(tail) == ""


def test_the_compile_step_runs_make_as_before_and_counts_packages(tmp_path: pathlib.Path) -> None:
    """A real `make` on a Makefile printing what the Kubernetes build prints (with package lines, as
    a verbose go would)."""
    tree = tmp_path / "kubernetes"
    tree.mkdir()
    (tree / "Makefile").write_text(
        "all:\n"
        "\t@echo '+++ [1124 04:26:40] Building go targets for linux/amd64:'\n"
        "\t@echo '    cmd/kube-apiserver'\n"
        "\t@echo \"flags: $$GOFLAGS targets: $(WHAT)\"\n"  # GOFLAGS as go sees it: in the environment
        "\t@for p in a/b c/d e/f; do echo k8s.io/kubernetes/$$p; done\n"
        "\t@mkdir -p _output/bin\n")
    written: list[str] = []
    built = build.compile_binaries(tree, written.append, log=tmp_path / "build.log")
    assert built == tree / "_output" / "bin" and built.is_dir()
    # The build's own flags, unchanged: nothing added to the environment go reads.
    assert "flags:  targets: cmd/kube-apiserver cmd/kube-controller-manager cmd/kube-scheduler" in (
        tmp_path / "build.log").read_text()
    assert written[0].startswith("[1/1] compiling kube-apiserver, kube-controller-manager, kube-scheduler")
    assert written[-1].startswith("[1/1] compiling") and written[-1].endswith("(3 Go packages compiled)")
    assert "    3 Go packages compiled, building kube-apiserver (0s)" in written


def test_the_terminal_view_shows_steps_amounts_and_notes() -> None:
    screen = io.StringIO()
    console = rich.console.Console(file=screen, force_terminal=True, width=160, color_system=None)
    with build_view.RichView(console) as view:
        view.plan(2)
        view.step("downloading")
        view.advance(17_000_000, total=34_000_000, unit="bytes", detail="1 of 3 files")
        view.note("a remark")
        view.done()
        view.step("compiling")
        view.advance(12, unit="Go packages compiled")
        view.done("finished")
    shown = screen.getvalue()
    for expected in ("[1/2] downloading", "17.0 of 34.0 MB, 1 of 3 files", "a remark", "[2/2] compiling",
                     "finished"):
        assert expected in shown, expected
