"""`pip install fedspread` is the SDK and the client commands; the processes need their extra.

Why: a user who only queries placements should not install Ray and the Kubernetes client, and one
who runs a process without its extra should read which extra to install, not a traceback. Each
check runs in a fresh interpreter (what is imported is process-wide), with the optional packages
made unimportable as they are when the extra is not installed.
"""

from __future__ import annotations

import subprocess
import sys

OPTIONAL = ("kubernetes", "ray", "prometheus_client")
WITHOUT_EXTRAS = "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in OPTIONAL)


def python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_sdk_and_the_client_commands_import_no_optional_package() -> None:
    result = python(WITHOUT_EXTRAS + "import federation.sdk, federation.cli.get, federation.cli.simulate, "
                    "federation.cli.certs\nprint('ok')")
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_a_process_without_its_extra_names_the_extra_in_one_line() -> None:
    result = python(WITHOUT_EXTRAS + "from federation.cli import main\n"
                    "main(['coordinator', '--hub-kubeconfig', '/nonexistent', '--insecure', '--no-ray'])")
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: `fedspread coordinator` needs the kubernetes package, which this installation lacks: "
        "pip install 'fedspread[coordinator]'"]


def test_help_needs_no_extra() -> None:
    result = python(WITHOUT_EXTRAS + "from federation.cli import main\nmain(['agent', '--help'])")
    assert result.returncode == 0 and "--coordinator" in result.stdout, result.stderr
