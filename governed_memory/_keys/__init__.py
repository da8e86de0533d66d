"""Key operations: rotation, workspace encryption and decryption, record re-sealing.

``write_key_file`` (``_keyfile``) is for the CLI: ``keys generate --out`` writes
the new master key through it, so the command writes no key file itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes

# Names other layers use, imported on first use (PEP 562) so that importing this
# package loads none of its modules until one is needed.
if TYPE_CHECKING:
    from ._keyfile import write_key_file
    from ._migration import MigrationReport, decrypt_workspace, encrypt_workspace
    from ._rotation import RotationReport, rotate

_LAZY: dict[str, str] = {
    "MigrationReport": "._migration",
    "decrypt_workspace": "._migration",
    "encrypt_workspace": "._migration",
    "RotationReport": "._rotation",
    "rotate": "._rotation",
    "write_key_file": "._keyfile",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "MigrationReport",
    "RotationReport",
    "decrypt_workspace",
    "encrypt_workspace",
    "rotate",
    "write_key_file",
]
