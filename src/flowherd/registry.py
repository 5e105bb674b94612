"""Name registries: one dict per concern maps YAML/CLI names to implementations."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

from flowherd.errors import UnknownNameError

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """A read-mostly mapping whose misses raise `UnknownNameError` with the closest name.

    >>> r = Registry("router", {"ecmp": 1, "spray": 2})
    >>> r["ecmp"]
    1
    >>> r["ecpm"]  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    flowherd.errors.UnknownNameError: unknown router 'ecpm'; did you mean 'ecmp'? ...
    """

    def __init__(self, kind: str, entries: Mapping[str, T] | None = None):
        self.kind = kind
        self._entries: dict[str, T] = dict(entries or {})

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, self._entries) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator adding an entry under `name`."""

        def deco(obj: T) -> T:
            self._entries[name] = obj
            return obj

        return deco

    def add(self, name: str, obj: T) -> None:
        self._entries[name] = obj
