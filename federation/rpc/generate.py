"""Regenerate the gRPC/protobuf Python code in `federation/rpc` from its `.proto` files.

Why this exists: the generated modules are committed next to the protos so that installing
fedspread (or running an agent) needs no protoc. Committed output can drift from its source, so the
same code that regenerates also checks: `python -m federation.rpc.generate --check` generates into a
temporary directory and exits 1 naming every file that differs, and a unit test calls
`stale_files()` so a proto edit without regeneration fails the test run.

Why it runs protoc with the repository root as include path: the protos import each other as
`federation/rpc/common.proto`, so protoc emits package-absolute imports
(`from federation.rpc import common_pb2 as ...`) and registers files under unique names in the
global descriptor pool (a bare `common.proto` could collide with another library's). As a safety
net against generator changes, any bare `import x_pb2` of our own modules is still rewritten to
the package-absolute form.

The output depends only on the pinned grpcio-tools version (see pyproject.toml), which is why that
pin must move together with a regeneration.

Usage: `make protos` (= `python -m federation.rpc.generate`) or `... --check`.
"""

from __future__ import annotations

import argparse
import importlib.resources
import re
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

RPC_DIR = Path(__file__).resolve().parent
REPO_ROOT = RPC_DIR.parent.parent
PACKAGE = "federation.rpc"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")

_SERVICE = re.compile(r"^\s*service\s+\w+", re.MULTILINE)


def proto_files() -> list[Path]:
    """The `.proto` sources, sorted so generation order is stable."""
    return sorted(RPC_DIR.glob("*.proto"))


def _is_generated_name(name: str) -> bool:
    return name.endswith(GENERATED_SUFFIXES)


def _our_modules(protos: Iterable[Path]) -> set[str]:
    return {f"{p.stem}_pb2" for p in protos} | {f"{p.stem}_pb2_grpc" for p in protos}


def absolutize_imports(text: str, modules: Iterable[str]) -> str:
    """Rewrite bare or relative imports of our generated `modules` to `from federation.rpc import`.

    Handles `import x_pb2 as y` and `from . import x_pb2 as y`; leaves every other line alone.
    """
    names = "|".join(sorted(re.escape(m) for m in modules))
    if not names:
        return text
    bare = re.compile(rf"^(\s*)import ({names})( as \w+)?\s*$", re.MULTILINE)
    relative = re.compile(rf"^(\s*)from \. import ({names})( as \w+)?\s*$", re.MULTILINE)

    def absolute(match: re.Match[str]) -> str:
        indent, module, alias = match.group(1), match.group(2), match.group(3) or ""
        return f"{indent}from {PACKAGE} import {module}{alias}"

    for pattern in (bare, relative):
        text = pattern.sub(absolute, text)
    return text


def _well_known_include() -> Path:
    """grpc_tools ships google/protobuf/*.proto (timestamp, struct, ...) in its `_proto` dir."""
    return Path(str(importlib.resources.files("grpc_tools") / "_proto"))


def _run_protoc(protos: Sequence[Path], staging: Path) -> None:
    # A dev-only dependency, imported here so that the module loads without it.
    from grpc_tools import protoc  # type: ignore[import-untyped]

    args = [
        "grpc_tools.protoc",
        f"--proto_path={REPO_ROOT}",
        f"--proto_path={_well_known_include()}",
        f"--python_out={staging}",
        f"--pyi_out={staging}",
        f"--grpc_python_out={staging}",
        *(str(p) for p in protos),
    ]
    code = protoc.main(args)
    if code != 0:
        raise RuntimeError(f"protoc failed with exit code {code} (arguments: {' '.join(args[1:])})")


def generate(out_dir: Path = RPC_DIR) -> list[Path]:
    """Generate the Python modules for every proto into `out_dir`; return the files written.

    When `out_dir` is the package directory, generated files whose proto no longer exists are
    deleted, so removing a proto leaves nothing behind.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    protos = proto_files()
    if not protos:
        raise RuntimeError(f"no .proto files in {RPC_DIR}")
    modules = _our_modules(protos)
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="fedspread-protoc-") as tmp:
        staging = Path(tmp)
        _run_protoc(protos, staging)
        produced = staging / RPC_DIR.relative_to(REPO_ROOT)
        for proto in protos:
            has_service = bool(_SERVICE.search(proto.read_text(encoding="utf-8")))
            for suffix in GENERATED_SUFFIXES:
                name = f"{proto.stem}{suffix}"
                if suffix == "_pb2_grpc.py" and not has_service:
                    continue  # the plugin emits an empty module for message-only protos
                source = produced / name
                if not source.is_file():
                    raise RuntimeError(f"protoc did not produce {name}")
                text = absolutize_imports(source.read_text(encoding="utf-8"), modules)
                target = out_dir / name
                target.write_text(text, encoding="utf-8")
                written.append(target)
    if out_dir.resolve() == RPC_DIR:
        keep = {p.name for p in written}
        for leftover in sorted(out_dir.iterdir()):
            if _is_generated_name(leftover.name) and leftover.name not in keep:
                leftover.unlink()
    return sorted(written)


def stale_files() -> list[str]:
    """Names of generated files in `federation/rpc` that differ from a fresh generation.

    Covers changed files, missing ones and leftovers whose proto is gone. Empty means in sync.
    """
    with tempfile.TemporaryDirectory(prefix="fedspread-protos-check-") as tmp:
        fresh = {p.name: p.read_bytes() for p in generate(Path(tmp))}
    committed = {p.name: p for p in RPC_DIR.iterdir() if _is_generated_name(p.name)}
    stale = [name for name, content in fresh.items()
             if name not in committed or committed[name].read_bytes() != content]
    stale += [name for name in committed if name not in fresh]
    return sorted(stale)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: regenerate, or with --check report drift and exit 1."""
    parser = argparse.ArgumentParser(
        prog="python -m federation.rpc.generate",
        description="Regenerate federation/rpc/*_pb2*.py(i) from the .proto files.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="generate into a temporary directory and exit 1 if the committed files differ",
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        if stale:
            print("generated gRPC code is out of date; run `make protos`:", file=sys.stderr)
            for name in stale:
                print(f"  federation/rpc/{name}", file=sys.stderr)
            return 1
        print("generated gRPC code is up to date")
        return 0
    for path in generate():
        print(path.relative_to(REPO_ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
