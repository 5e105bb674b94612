"""Every output written to a temporary file beside it, then renamed over it.

A reader (or the next command) sees the old file or the new one, never half of one: a full disk,
a read-only file system or a kill while writing leaves at most a hidden temporary file, which
is removed when the error is seen. ``os.replace`` is atomic on POSIX when both names are in one
directory, which is why the temporary file is made beside the target, not in ``/tmp``.

`replacing` is the general form (the writer gets a path: matplotlib's ``savefig``, DuckDB,
stable-baselines3's ``save``); `write_text` and `write_bytes` the common ones. A failure is one
`flowherd.errors.WriteError` naming the path and the cause (``No space left on device``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from flowherd.errors import WriteError
from flowherd.sanitize import shown

__all__ = ["replacing", "temporary_name", "write_bytes", "write_error", "write_text"]


def temporary_name(path: Path) -> Path:
    """A hidden name beside `path` that keeps its suffix (matplotlib picks the format by it,
    stable-baselines3 adds ``.zip`` to a name without it)."""
    return path.with_name(f".{path.stem}.{secrets.token_hex(6)}.tmp{path.suffix}")


def write_error(path: str | Path, err: BaseException, field: str | None = None) -> WriteError:
    """The one-line error for a failed write of `path` (``cannot write 'x': No space left on
    device (--out)``)."""
    cause = getattr(err, "strerror", None) or " ".join(str(err).split()) or type(err).__name__
    where = f" ({field})" if field else ""
    return WriteError(f"cannot write {shown(repr(str(path)))}: {cause}{where}")


def _remove(tmp: Path) -> None:
    for p in (tmp, tmp.with_name(tmp.name + ".wal")):  # DuckDB's write-ahead log too
        with contextlib.suppress(OSError):
            p.unlink()


def _sync(path: Path) -> None:
    # the data reaches the disk before the name does: after a crash the new name never points at
    # an empty file (ext4's delayed allocation would allow it)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def replacing(path: str | Path, *, field: str | None = None) -> Iterator[Path]:
    """Yield a temporary path beside `path`; when the block ends without error, rename it over
    `path`; on any error, remove it and raise.

    Args:
        path: The file to write.
        field: The flag or field that named `path`, for the message.

    Raises:
        WriteError: The directory cannot be created, or the writer or the rename failed with an
            `OSError` (the writer's other exceptions pass unchanged, the temporary file removed).
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise write_error(target, err, field) from None
    tmp = temporary_name(target)
    try:
        yield tmp
        if tmp.exists():
            _sync(tmp)
            os.replace(tmp, target)
    except OSError as err:
        _remove(tmp)
        raise write_error(target, err, field) from None
    except BaseException:
        _remove(tmp)
        raise


def write_bytes(path: str | Path, data: bytes, *, field: str | None = None) -> Path:
    """Write `data` to `path` atomically (module docstring); returns the path.

    Raises:
        WriteError: As `replacing`.
    """
    target = Path(path)
    with replacing(target, field=field) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
    return target


def write_text(path: str | Path, text: str, *, field: str | None = None) -> Path:
    """Write `text` as UTF-8 to `path` atomically; returns the path.

    Raises:
        WriteError: As `replacing`.
    """
    return write_bytes(path, text.encode("utf-8"), field=field)
