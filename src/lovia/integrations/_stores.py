"""One lovia store per event loop, for integrations whose engine may run a run on a loop
of its own (DBOS's background loop, a Temporal worker's)."""

from __future__ import annotations

import asyncio
import weakref

from ..stores import Store, store

__all__ = ["LoopStores"]


class LoopStores:
    """The store at ``url``, opened once per event loop (a pool belongs to one loop)."""

    __slots__ = ("_stores", "url")

    def __init__(self, url: str) -> None:
        self.url = url
        self._stores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Store] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> Store:
        """The running loop's store (opened on first use)."""
        loop = asyncio.get_running_loop()
        db = self._stores.get(loop)
        if db is None:
            db = self._stores[loop] = store(self.url)
        return db

    async def aclose(self) -> None:
        """Close the running loop's store, if it opened one."""
        db = self._stores.pop(asyncio.get_running_loop(), None)
        if db is not None:
            await db.aclose()
