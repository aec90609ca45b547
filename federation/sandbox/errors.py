"""The sandbox's one error type, apart so that every sandbox module can raise it.

Why a module of its own: the launcher raises it, and so do modules the launcher imports (the
aggregation layer's registration); defining it in the launcher would make them import each other.
`launcher.SandboxError` remains the name callers use.
"""

from __future__ import annotations


class SandboxError(RuntimeError):
    """The sandbox could not start or is not healthy; the message says which component and why."""
