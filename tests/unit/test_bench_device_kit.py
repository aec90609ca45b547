"""The kit for a machine with more cores (`bench/device_kit.py`) and the Ray variants it runs.

The kit's wheels come from PyPI, so building it is not a unit test; what is tested here is what
could break without anyone noticing until a borrowed machine's minutes are spent: the rewritten
wheel installs with the real pip and keeps what it must, the lists name real pinned
distributions, the script is valid bash whose defaults the benchmark accepts, and the actor
counts parse.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import stat
import subprocess
import sys
import zipfile

import pytest

from bench import device_kit, placement_backends, placement_compare, placement_world

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _wheel(folder: pathlib.Path) -> pathlib.Path:
    """A small wheel of package `demo`: a module, an executable, and a folder to drop."""
    wheel = folder / "demo_pkg-1.0-py3-none-any.whl"
    files = {"demo_pkg/__init__.py": b"VALUE = 1\n", "demo_pkg/tool/run": b"#!/bin/sh\necho ok\n",
             "demo_pkg/extra/big.py": b"X = 2\n", "demo_pkg/extra/more/deep.py": b"Y = 3\n",
             "demo_pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
             "demo_pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                             b"Tag: py3-none-any\n"}
    record = "".join(f"{name},,\n" for name in [*files, "demo_pkg-1.0.dist-info/RECORD"])
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0))
            mode = 0o755 if name.endswith("/run") else 0o644
            info.external_attr = (stat.S_IFREG | mode) << 16
            archive.writestr(info, data)
        archive.writestr("demo_pkg-1.0.dist-info/RECORD", record)
    return wheel


def test_a_trimmed_wheel_installs_without_the_dropped_folders_and_keeps_modes(tmp_path: pathlib.Path) -> None:
    wheel = _wheel(tmp_path)
    before, after = device_kit.trim_wheel(wheel, package="demo_pkg", unused=("extra",))
    assert before > 0 and after > 0
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert not [n for n in names if n.startswith("demo_pkg/extra/")]
        record = archive.read("demo_pkg-1.0.dist-info/RECORD").decode()
        assert "extra/" not in record and "demo_pkg/tool/run" in record
        assert {archive.getinfo(n).compress_type for n in names} == {zipfile.ZIP_LZMA}
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "--no-index", "--no-deps", "--target", str(target), str(wheel)], check=True, timeout=120)
    assert (target / "demo_pkg" / "__init__.py").read_text() == "VALUE = 1\n"
    assert not (target / "demo_pkg" / "extra").exists()
    assert os.stat(target / "demo_pkg" / "tool" / "run").st_mode & stat.S_IXUSR


def test_the_kit_names_only_pinned_distributions_and_the_coordinators_requirements() -> None:
    pinned = {line.split("==")[0].lower().replace("_", "-")
              for line in (ROOT / "constraints.txt").read_text().splitlines() if "==" in line}
    assert set(device_kit.TRIMMED) <= pinned and pinned >= device_kit.LEFT_OUT
    wanted = " ".join(device_kit.requirements())
    assert "ray" in wanted and "grpcio" in wanted and "kubernetes" in wanted
    assert not device_kit.LEFT_OUT & {"ray", "grpcio", "protobuf", "pydantic", "kubernetes", "cryptography"}
    assert device_kit.distribution(pathlib.Path("aiohttp_retry-2.9.1-py3-none-any.whl")) == "aiohttp-retry"


def test_the_script_is_bash_and_its_defaults_are_what_the_benchmark_takes(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(device_kit.script(commit="abc123"))
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
    text = script.read_text()
    assert "FEDSPREAD_BENCH_COMMIT=abc123" in text and "bench.placement_compare" in text
    shape = placement_world.parse_shape(device_kit.DEFAULT_SHAPE)
    assert shape.spreads >= 30_000 and shape.clusters == 1_000
    variants = list(device_kit.DEFAULT_VARIANTS)
    assert [placement_compare.variant(v) for v in variants] == variants
    refused = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "usage: run.sh OUT_DIR" in refused.stderr  # no folder: nothing runs


@pytest.mark.parametrize(("name", "actors"), [
    ("local", None), ("ray", placement_backends.Actors(placement_backends.RAY_SHARDS, 1)),
    ("ray-12", placement_backends.Actors(12, 1)), ("ray-8x2", placement_backends.Actors(8, 2))])
def test_ray_variants_name_their_actor_counts(name: str, actors: placement_backends.Actors | None) -> None:
    assert placement_backends.ray_actors(name) == actors
    assert placement_backends.parse_backend(name) == name


@pytest.mark.parametrize("name", ["ray-0", "ray-x2", "ray-4x0", "ray4", "Ray-4", "hub-2", ""])
def test_other_names_are_refused_with_the_ones_that_exist(name: str) -> None:
    with pytest.raises(ValueError, match="ray-N or ray-NxM"):
        placement_backends.ray_actors(name)
    with pytest.raises(argparse.ArgumentTypeError, match="ray-N / ray-NxM"):
        placement_compare.variant(name)
    assert placement_compare.variant("local-unbatched") == "local-unbatched"


def test_a_download_that_fails_ends_with_a_message_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str],
) -> None:
    def unreachable(wheels: pathlib.Path) -> None:
        raise subprocess.CalledProcessError(1, ["pip", "download"])

    monkeypatch.setattr(device_kit, "download", unreachable)
    monkeypatch.setattr(device_kit.run, "commit", lambda: "abc123")  # a clean checkout
    assert device_kit.main(["--output", str(tmp_path / "kit")]) == 1
    assert "could not download the wheels (exit 1)" in capsys.readouterr().err

