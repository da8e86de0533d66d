"""Login rate limits: a sliding window per user name and per client address.

Each sign-in attempt (local or OIDC callback failures alike) is counted
against two keys, ``user:<name>`` and ``ip:<address>``; when either has had
``attempts`` in the last ``window`` seconds the attempt is refused before any
password is checked, with the seconds until the oldest attempt leaves the
window (the ``Retry-After`` of the 429). Counting per address stops one
client from guessing many accounts; counting per name stops many clients
from guessing one. State is in memory (one console process); it is bounded
by ``max_keys``, the least recently used keys being forgotten first.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable

__all__ = ["SlidingWindowLimiter"]


class SlidingWindowLimiter:
    """At most ``attempts`` per ``window`` seconds for each key.

    Args:
        attempts: attempts allowed in any window.
        window: the window, in seconds.
        now: the clock, in seconds (monotonic by default).
        max_keys: keys remembered at most (the least recently used are dropped).
    """

    def __init__(
        self,
        *,
        attempts: int,
        window: float,
        now: Callable[[], float] = time.monotonic,
        max_keys: int = 100_000,
    ) -> None:
        self.attempts = attempts
        self.window = window
        self._now = now
        self._max_keys = max_keys
        self._lock = threading.Lock()
        self._hits: OrderedDict[str, deque[float]] = OrderedDict()

    def attempt(self, keys: Iterable[str]) -> int | None:
        """Count one attempt against every key, or refuse it.

        Returns:
            None when allowed (and counted); else the whole seconds to wait
            before one is allowed (the attempt is not counted).
        """
        at = self._now()
        keys = list(keys)
        with self._lock:
            wait = 0.0
            for key in keys:
                hits = self._window(key, at)
                if len(hits) >= self.attempts:
                    wait = max(wait, hits[0] + self.window - at)
            if wait > 0:
                return max(1, math.ceil(wait))
            for key in keys:
                self._hits.setdefault(key, deque()).append(at)
                self._hits.move_to_end(key)
            while len(self._hits) > self._max_keys:
                self._hits.popitem(last=False)
        return None

    def _window(self, key: str, at: float) -> deque[float]:
        hits = self._hits.get(key)
        if hits is None:
            return deque()
        while hits and hits[0] <= at - self.window:
            hits.popleft()
        if not hits:
            del self._hits[key]
        return hits
