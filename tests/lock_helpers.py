"""What a test asks of a lock from outside: is it free right now?"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def flock_is_free(path: Path) -> bool:
    """Whether no one holds an ``flock`` on ``path`` (a file or a folder), tried without waiting."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True
