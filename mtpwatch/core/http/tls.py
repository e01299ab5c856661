"""How https:// servers are verified: the system's CA store (default), a CA bundle, or not at all.

One process-wide setting, chosen once on the command line (``--ca-bundle FILE`` / ``--insecure``,
or ``MTPWATCH_CA_BUNDLE`` / ``MTPWATCH_INSECURE=1``) and read by every HTTP client mtpwatch makes,
so the app, the bench and the snapshot agree. Plain http:// (the usual loopback or SSH tunnel)
does not use it.
"""

from __future__ import annotations

import os
import ssl
from pathlib import Path

Verify = bool | ssl.SSLContext

_verify: Verify = True


class TlsConfigError(ValueError):
    """A CA bundle that cannot be used; `str()` is one line."""


def configure(*, insecure: bool = False, ca_bundle: str | os.PathLike[str] | None = None) -> None:
    """Set how https:// servers are verified; raises `TlsConfigError` for an unusable bundle."""
    global _verify
    if insecure and ca_bundle is not None:
        raise TlsConfigError("--insecure and --ca-bundle contradict each other: give one")
    if insecure or ca_bundle is None:
        _verify = not insecure  # False: no verification; True: the system's CA store
        return
    path = Path(ca_bundle)
    if not path.is_file():
        raise TlsConfigError(f"CA bundle not found: {path}")
    try:
        _verify = ssl.create_default_context(cafile=str(path))
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(f"CA bundle {path} is not a PEM certificate file ({exc})") from None


def verify() -> Verify:
    """What to pass as httpx's `verify=`: True (system CAs), an SSL context, or False (--insecure)."""
    return _verify
