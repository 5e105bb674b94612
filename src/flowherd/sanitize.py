"""Text that comes from data, made safe to print on a terminal and to use in a file name.

Names reach flowherd from files it does not control: job, tenant and scenario names from YAML,
job ids from trace CSVs, the names of those files themselves. A terminal acts on some characters
instead of showing them: ESC starts ANSI sequences (clear the screen, move the cursor) and OSC
sequences (set the window title, plant a hidden hyperlink, OSC 8); the C1 control CSI (U+009B)
does the same in one character; NUL, backspace and carriage return hide what came before; the
Unicode bidirectional overrides and isolates (U+202A..U+202E, U+2066..U+2069) reorder what
follows, so that ``lab<U+202E>exe.txt`` shows as ``labtxt.exe`` (CVE-2021-42574, "Trojan
Source"). `shown` writes every such character as a Python escape (``\\x1b``, ``\\u202e``), so a
name is shown as it is, not acted on; `file_component` turns a name into one safe component of
a path.

Every place that prints data goes through `shown` (the CLI's tables, progress lines and error
lines: `flowherd.cli.checks.plain` and `error_line`); every name that becomes part of a file or
directory name through `file_component`.
"""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["file_component", "shown"]

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(c: str) -> str:
    code = ord(c)
    if c in _NAMED:
        return _NAMED[c]
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def shown(value: object) -> str:
    """`value` as text a terminal shows as it is.

    Every character that is not printable (``str.isprintable``: the C0 and C1 controls and DEL,
    the format characters among which the bidi overrides, isolates and marks and the zero-width
    ones, line and paragraph separators, unassigned and private-use code points, every space but
    the plain one) is written as its Python escape; everything else is kept.

    >>> shown("job-a")
    'job-a'
    >>> shown("a\\x1b[2Jb")
    'a\\\\x1b[2Jb'
    >>> shown("lab\\u202eexe.txt"), shown("x\\x00y\\nz")
    ('lab\\\\u202eexe.txt', 'x\\\\x00y\\\\nz')
    """
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def file_component(value: object, *, max_chars: int = 100) -> str:
    """`value` as one component of a file name: ASCII letters, digits, ``_``, ``-``, ``.`` and
    ``~`` kept, every other byte of its UTF-8 written as ``%XX`` (path separators, control and
    bidi characters, spaces), a leading dot or dash too (no hidden file, no option), at most
    `max_chars` characters, never empty, ``.`` or ``..``.

    >>> file_component("llama-8b_run.1"), file_component("../x"), file_component("a\\x1bb")
    ('llama-8b_run.1', '%2E.%2Fx', 'a%1Bb')
    >>> file_component(""), file_component("-rf")
    ('_', '%2Drf')
    """
    text = quote(str(value), safe="~")
    if text[:1] in (".", "-"):
        text = f"%{ord(text[0]):02X}{text[1:]}"
    if len(text) > max_chars:
        cut = text[:max_chars]
        pct = cut.rfind("%", max_chars - 2)  # no escape cut in half
        text = cut[:pct] if pct >= 0 else cut
    return text or "_"
