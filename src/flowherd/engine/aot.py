"""The engine's numba kernels, compiled ahead of time at install, numba's JIT as the fallback.

Importing numba and loading its cached machine code for the ten kernels a run calls costs about
a second (numba's import 0.4 s, LLVM re-linking ~50 ms a kernel): five times what a small
`flowherd collective` computes. So `pip install -e .` (setup.py) compiles the kernels a run of
the default engine calls from Python (`EXPORTS`) into one extension module with
`numba.pycc`, which needs no numba at run time, and every kernel of `flowherd.engine` is
decorated with `kernel` instead of ``numba.njit(cache=True)``:

* when the extension is there and was built from these very sources (`source_digest` is
  compiled into it), an exported kernel is its compiled function
  behind a check of the argument types (pycc's wrappers convert nothing and check nothing: a
  wrong dtype would be read as raw memory), and any other kernel is numba's JIT, imported on
  the first call; a call whose arguments do not match the exported signature goes to the JIT too;
* otherwise (no extension, sources edited since it was built, ``FLOWHERD_JIT=1``) every kernel
  is ``numba.njit(cache=True)``.

The two give the same numbers bit for bit (tests/test_startup_aot.py runs both): the same
numba front end types and lowers the same code, without fast-math, so LLVM may not reassociate
or contract floating-point operations, whichever CPU it targets.

A kernel that another kernel calls must be decorated with `kernel` too (a plain ``@njit``
function could not call an exported kernel: numba cannot type the compiled wrapper);
tests/test_startup_aot.py checks that no module of the package uses ``njit`` directly.

Rebuild after editing the engine: ``make aot`` (``python -m flowherd.engine.aot_build``);
``python -m flowherd.engine.aot_build --status`` says which path is in use.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["EXPORTS", "NO_REFCOUNT", "build", "kernel", "mode", "purge_cache", "source_digest"]

_SELF = Path(__file__).resolve()
_HERE = _SELF.parent
EXTENSION = "flowherd.engine._kernels_aot"

_A = "i8[::1]"  # int64 arrays
_F = "f8[::1]"  # float64 arrays
_B = "b1[::1]"  # bool arrays

#: Options of a kernel that allocates nothing and returns no array: ``@kernel(**NO_REFCOUNT)``.
#: numba counts references to every array a function binds (its arguments at entry, every
#: variable an inlined helper copies them into), with an atomic increment and decrement each:
#: in the engine's inner loops that was 58% of a cluster run's time (perf). Without
#: the runtime (``_nrt=False``) a kernel touches no count; its callers pass their arrays as
#: they are. Same code otherwise, so the same numbers bit for bit.
NO_REFCOUNT: dict[str, bool] = {"_nrt": False}


def _sig(ret: str, *args: str) -> str:
    return f"{ret}({', '.join(args)})"


#: The kernels the engine calls from Python on its default path (ideal network, the bottleneck
#: rule), each with the one signature it is called with (numba's type syntax; arrays are 1-D
#: and C-contiguous). Others stay JIT-compiled on first use.
EXPORTS: dict[str, str] = {
    "flowherd.engine.step_kernels.soonest": _sig("f8", _A, _F),
    "flowherd.engine.step_kernels.split_done": _sig(f"UniTuple({_A}, 2)", _A, _F, _F, "f8", "f8", "f8"),
    "flowherd.engine.step_kernels.end_flows": _sig(
        "Tuple((i8, f8))", _A, "f8", _F, _F, _A, _F, _F, _A, _A, _A, _F, _F, _A, _F, _F, _F, _A, _A, _A,
        _A, _A, _F, _F, _F),
    "flowherd.engine.step_kernels.count_off": _sig(_A, _A, _A, _F, _A, _F),
    "flowherd.engine.step_kernels.start_flows": _sig(
        f"Tuple(({_A}, f8, i8))", "i8", "i8", "f8", _F, _A, _A, _F, _F, _F, _F, _F, _F, _F),
    "flowherd.engine.bottleneck.local_update": _sig(
        f"Tuple(({_A}, i8, i8))", _A, _A, _A, _A, _A, _F, _F, _F, _F, _A, _F, _F, _A, _B, _B, _A, _A,
        _A, _A, _A, _F, _A, _F, _A, _F, _B, _A),
    "flowherd.engine.allocation.settle": _sig(
        "none", _A, "f8", "b1", _F, _F, _F, _A, _A, _A, _F, _F, _A, _F, _F, _F),
    "flowherd.engine.allocation.activate": _sig(
        "none", _A, "f8", _F, _F, _F, _F, _A, _A, _A, _F, _A, _F, _F),
    "flowherd.engine.incidence.adj_insert": _sig("UniTuple(i8, 2)", *[_A] * 10, "i8"),
    "flowherd.engine.incidence.adj_rebuild": _sig("i8", *[_A] * 10),
    "flowherd.engine.event_loop.heap_push": _sig("none", _F, _A, _A, _A, _A, "f8", "i8", "i8"),
    "flowherd.engine.event_loop.run_events": _sig(  # `flowherd.engine.event_loop.drive` calls it
        f"Tuple((i8, {_A}, {_F}))",
        "f8", _A, _F, _A, _A, _A, _A, _F, _F, _F, _A, _A, _A, _F, _F, _F, _F, _F, _F, _F, _B, _A,
        _A, _F, _A, _F, _F, _F, _F, _A, _F, _F, _B, _A, _F, _A, _F, _A, _F, _B, _A, _A, _A, _A, _A, _A,
        _A, _F, _A, _A, _F, _F, _F, _F, _F, _A, _A, _A, _A, _B, _A, _A, _A, _F, _A, _A, _A,
        # the congestion model's state (`flowherd.engine.network.model.NetworkModel.loop_args`)
        _B, _B, _F, _A, _B, _F, _A, _F, _A, _F, _F, "i8", _F, _A, _F, _A, _A, _F, _F, _A, _F, _A, _A, _A, _A,
        _A, _F,
        # its work arrays (`flowherd.engine.event_loop.work_sizes`)
        _A, _F, _B),
    # the congestion model's passes (`flowherd.engine.network`): a roce or tcp run calls no JIT
    # kernel either
    "flowherd.engine.network.packed.rates_step": _sig(
        f"Tuple(({_A}, {_A}, {_A}, {_F}, {_F}, {_A}, {_F}, {_B}, {_B}, {_A}, {_F}, i8))",
        _A, _A, _A, _A, _F, _F, _F, _F, _F, _F, _A, _F, "f8", _F, _A, _B, _F, _A, _B, _F, _A, _F, _F, "i8"),
    "flowherd.engine.network.packed.done_step": _sig(
        f"Tuple(({_A}, {_B}, {_A}, {_F}, i8))",
        _A, _A, _A, _A, _A, _F, "f8", _F, _A, _B, _F, _A, _F, _F, "i8"),
    "flowherd.engine.network.kernels.link_update": _sig(
        f"Tuple(({_B}, {_A}, {_F}, i8))",
        _A, _A, _F, _F, "f8", _F, _F, _F, _F, _F, _F, _F, _B, _B, _F, _F, _F, "f8", "b1", "f8", "f8", "f8",
        _A, _F, _F, "i8"),
    "flowherd.engine.network.burst_kernels.burst_members": _sig(
        f"Tuple(({_B}, {_B}, {_A}, {_A}, {_B}, {_A}, {_F}, {_F}, {_A}, i8))",
        _A, _A, _A, _A, _B, _A, _F, _B, "b1", "f8", "f8", _A, _A, _F, _F, "f8", _A, _A, _B, _B, _A, _F, "i8"),
    "flowherd.engine.network.burst_kernels.burst_apply": _sig(
        f"Tuple((i8, i8, {_A}, {_F}))",
        _A, _A, _A, _A, _B, _A, _F, _F, _F, _A, _A, _A, _A, _A, _B, _F, _F, _F, _B, _B, "b1", _A, _F, _B, _B,
        _F, _A, _A, _F, _F, _A, _F, "i8", "f8", "f8", "f8", "f8", "f8", "i8", _A, _A, _B),
    "flowherd.engine.network.packed.start_loss_memo": _sig(
        "f8", "i8", "f8", "f8", "f8", "i8", _A, _F, _A, _F, "i8"),
    "flowherd.engine.network.packed.memo_rehash": _sig("none", _A, _F, _A, _F),
    "flowherd.engine.network.dcqcn.start_loss_stepped_s": _sig(
        "f8", "i8", "f8", "f8", "f8", "i8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "f8", "i8", "f8", "f8",
        "f8", "f8", "f8", "f8"),
}
# the kernels a cluster run calls from Python besides (batched coflows, background
# batches, the flows a quiet window holds); signatures from a FLOWHERD_JIT=1 run's dispatchers
EXPORTS.update({
    "flowherd.engine.event_loop.link_coflows": _sig(
        "i8", "i8", "i8", "f8", _F, _F, _F, _A, _A, _A, _A, _A, _A, _A, _A, "i8", _F, _A, _A, _A, _A),
    "flowherd.engine.event_loop.heap_push_many": _sig("none", _F, _A, _A, _A, _A, _F, "i8", _A),
    "flowherd.engine.incidence.adj_remove": _sig("none", *[_A] * 9),
})


# ---- which path ---------------------------------------------------------------------------
class _Spec:
    """One decorated kernel: its Python function, numba options, lazily its JIT dispatcher."""

    __slots__ = ("disp", "fn", "options")

    def __init__(self, fn: Callable, options: dict[str, Any]):
        self.fn = fn
        self.options = options
        self.disp: Any = None


_state: dict[str, Any] = {}  # "module": the extension or None; "why": the reason
#: per exported kernel: calls that went to the JIT because their arguments did not match
FALLBACKS: dict[str, int] = {}
_JIT_GLOBALS: dict[str, dict[str, Any]] = {}


def source_digest() -> int:
    """A 63-bit digest of what the compiled kernels are made of: `EXPORTS` and every ``.py``
    file of `flowherd.engine` that decorates a kernel (paths and contents; the constants a kernel
    reads are those of its module or of another kernel module)."""
    h = hashlib.sha256(repr(sorted(EXPORTS.items())).encode())
    for p in sorted(_HERE.rglob("*.py")):
        text = p.read_bytes()
        if b"@kernel" in text and p != _SELF:
            h.update(p.relative_to(_HERE).as_posix().encode() + b"\0" + text + b"\0")
    return int.from_bytes(h.digest()[:8], "little") >> 1


def _extension() -> Any:
    """The compiled extension if it is current and wanted, else None (decided once)."""
    if "module" in _state:
        return _state["module"]
    mod, why = None, ""
    if os.environ.get("FLOWHERD_JIT", "") not in ("", "0"):
        why = "FLOWHERD_JIT is set"
    else:
        try:
            ext = importlib.import_module(EXTENSION)
        except ImportError as e:
            why = f"no compiled kernels ({e}); `make aot` builds them"
        else:
            if ext.source_digest() == source_digest():
                mod, why = ext, f"ahead-of-time compiled ({Path(ext.__file__).name})"
            else:
                why = ("the compiled kernels are older than flowherd/engine's sources; `make aot` "
                       "rebuilds them")
    if mod is None:
        log.debug("numba kernels: JIT (%s)", why)
    _state.update(module=mod, why=why)
    return mod


def mode() -> tuple[str, str]:
    """("aot" or "jit", why): the path the kernels take in this process."""
    return ("aot" if _extension() is not None else "jit"), _state["why"]


def _export_name(qualified: str) -> str:
    return qualified.removeprefix("flowherd.engine.").replace(".", "__")


# ---- the decorator ------------------------------------------------------------------------
def kernel(fn: Callable | None = None, **options: Any) -> Any:
    """Decorate a numba kernel of `flowherd.engine`: ``@kernel`` or ``@kernel(inline="always")``.

    The options are numba.njit's (``cache=True`` is implied). Returns the compiled function of
    the extension (behind a check of its arguments' types), or numba's dispatcher.
    """
    if fn is None:
        return lambda f: kernel(f, **options)
    # numba compiles a kernel called from another with the caller's flags where its own leave
    # one unset: a kernel that allocates, first compiled from a `NO_REFCOUNT` caller, would lose
    # its runtime and fail to type. Every kernel says which it takes.
    options = {"_nrt": True, **options}
    spec = _Spec(fn, options)
    ext = _extension()
    if ext is None:
        return _jit_of(spec, plain=True)
    name = f"{fn.__module__}.{fn.__name__}"
    compiled = getattr(ext, _export_name(name), None) if name in EXPORTS else None
    wrapper = _lazy(spec) if compiled is None else _checked(spec, compiled, EXPORTS[name])
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        setattr(wrapper, attr, getattr(fn, attr))
    wrapper.__wrapped__ = fn
    wrapper.py_func = fn
    wrapper._flowherd_kernel = spec
    return wrapper


def _jit_of(spec: _Spec, *, plain: bool = False) -> Any:
    """numba's dispatcher of `spec` (made once). On the AOT path the function is re-bound to a
    copy of its module's globals in which every kernel is its dispatcher, so that numba can
    type the calls between kernels."""
    if spec.disp is None:
        import numba

        fn = spec.fn
        if not plain:
            fn = types.FunctionType(fn.__code__, _jit_globals(fn.__module__), fn.__name__,
                                    fn.__defaults__, fn.__closure__)
            fn.__qualname__, fn.__module__ = spec.fn.__qualname__, spec.fn.__module__
        spec.disp = numba.njit(cache=True, **spec.options)(fn)
    return spec.disp


def _jit_globals(module: str) -> dict[str, Any]:
    g = _JIT_GLOBALS.get(module)
    if g is None:
        g = _JIT_GLOBALS[module] = dict(vars(sys.modules[module]))
        for k, v in list(g.items()):
            if isinstance(v, types.FunctionType) and "_flowherd_kernel" in v.__dict__:
                g[k] = _jit_of(v._flowherd_kernel)
    return g


def _lazy(spec: _Spec) -> Callable:
    def call(*args):
        return _jit_of(spec)(*args)

    return call


_CHECKS = {  # what each argument type of `EXPORTS` accepts: exactly what numba would type so
    "i8": "({a}.__class__ is int or {a}.__class__ is _np.int64)",
    "f8": "({a}.__class__ is float or {a}.__class__ is _np.float64)",
    "b1": "({a}.__class__ is bool or {a}.__class__ is _np.bool_)",
}
_ARRAY = ("({a}.__class__ is _np.ndarray and {a}.dtype == _dt_{t} and {a}.ndim == 1 and "
          "{a}.flags.c_contiguous)")


def _arg_types(signature: str) -> list[str]:
    """The argument types of a signature of `EXPORTS` ("i8", "f8", "b1", "i8[::1]" ...)."""
    depth, start = 0, 0
    for i, ch in enumerate(signature):  # the argument list: the last top-level parentheses
        if ch == "(":
            if depth == 0:
                start = i
            depth += 1
        elif ch == ")":
            depth -= 1
    return [a.strip() for a in signature[start + 1:-1].split(",")]


def _mismatch(types_: list[str], args: tuple) -> str:
    """Which argument does not have its exported type (for the log)."""
    if len(args) != len(types_):
        return f"{len(args)} arguments, {len(types_)} exported"
    for i, (a, t) in enumerate(zip(args, types_, strict=True)):
        got = (f"{type(a).__name__} {getattr(a, 'dtype', '')} ndim={getattr(a, 'ndim', '')} "
               f"contiguous={getattr(getattr(a, 'flags', None), 'c_contiguous', '')}")
        want = t[:2] if t.endswith("[::1]") else t
        if t.endswith("[::1]"):
            ok = (type(a) is _np().ndarray and a.dtype == _np().dtype(_NP_NAMES[want])
                  and a.ndim == 1 and a.flags.c_contiguous)
        else:
            ok = type(a).__name__ in _PY_NAMES[t]
        if not ok:
            return f"argument {i} is {got}, exported as {t}"
    return "every argument matches"


_NP_NAMES = {"i8": "int64", "f8": "float64", "b1": "bool"}
_PY_NAMES = {"i8": ("int", "int64"), "f8": ("float", "float64"), "b1": ("bool", "bool")}


def _np():
    import numpy

    return numpy


def _checked(spec: _Spec, compiled: Callable, signature: str) -> Callable:
    """`compiled` behind a check that every argument has the exported type, else the JIT."""
    import numpy as np

    types_ = _arg_types(signature)
    code = spec.fn.__code__
    if len(types_) != code.co_argcount:
        raise TypeError(f"EXPORTS gives {len(types_)} arguments for {spec.fn.__name__}, the kernel "
                        f"takes {code.co_argcount}")
    args = [f"a{i}" for i in range(len(types_))]
    conds = [_ARRAY.format(a=a, t=t[:2]) if t.endswith("[::1]") else _CHECKS[t].format(a=a)
             for a, t in zip(args, types_, strict=True)]
    arglist = ", ".join(args)
    src = (f"def call({arglist}):\n    if {' and '.join(conds)}:\n        return _aot({arglist})\n"
           f"    return _slow({arglist})\n")
    name = f"{spec.fn.__module__}.{spec.fn.__name__}"

    def slow(*a):
        if name not in FALLBACKS:
            log.debug("%s: %s; numba JIT", name, _mismatch(types_, a))
        FALLBACKS[name] = FALLBACKS.get(name, 0) + 1
        return _jit_of(spec)(*a)

    env = {"_np": np, "_aot": compiled, "_slow": slow, "_dt_i8": np.dtype(np.int64),
           "_dt_f8": np.dtype(np.float64), "_dt_b1": np.dtype(np.bool_)}
    # One flat check per kernel (what numba's dispatcher does in C), compiled on the first call:
    # compiling the 21 checks cost 0.011 s of every start-up (a collective calls three). The
    # function handed out takes the check's code at that call, so later calls run it directly.
    call = types.FunctionType(_first_call.__code__, env, "call")

    def compile_check(args: tuple) -> Any:
        exec(src, env)
        call.__code__ = env["call"].__code__
        return call(*args)

    env["_compile_check"] = compile_check
    return call


def _first_call(*args):
    """The code of a checked kernel until its first call (`_checked`); its globals hold
    ``_compile_check``."""
    return _compile_check(args)  # noqa: F821 (a name of the function's own globals)


# ---- the build ----------------------------------------------------------------------------
def purge_cache(root: Path | str = _HERE) -> int:
    """Delete numba's cached machine code under ``root`` (the ``.nbi`` / ``.nbc`` files of its
    ``__pycache__`` directories); returns how many files went.

    numba checks a cached kernel against its own source file only: a caller cached before
    (``bottleneck.local_core``) keeps the callee it was compiled with (``fairshare._fill``) after
    the callee's file changed, so a build from a warm cache would link that old code into the
    extension, whose `source_digest` says current (an in-tree build would then differ from a
    clean checkout's). So `build` starts from no cache.
    """
    gone = 0
    for f in Path(root).rglob("__pycache__/*.nb[ic]"):
        f.unlink(missing_ok=True)
        gone += 1
    return gone


def build(output: Path | str | None = None, *, cpu: str | None = None) -> Path:
    """Compile `EXPORTS` into the extension module `EXTENSION` (about a minute of CPU).

    Args:
        output: The file to write (default: beside this module, where the editable install
            and ``make aot`` put it).
        cpu: LLVM's target CPU (default ``FLOWHERD_AOT_CPU`` or ``host``: the machine that
            builds is the one that runs an editable install; ``""`` for a generic x86-64).

    Returns:
        The path written.
    """
    os.environ["FLOWHERD_JIT"] = "1"  # the kernel modules get plain dispatchers to compile
    _state.clear()
    purge_cache()  # compiled from these sources, not from numba's cache (`purge_cache`)

    from numba.pycc import CC

    class _InOrder(CC):
        # numba compiles the exports one after the other in one typing context; sorted by name
        # (pycc's order), `end_flows` after `settle` fails to type (numba 0.68: "No conversion
        # from int64 to Literal[int]"), in `EXPORTS`' order (callers first, as the JIT meets
        # them) it does not
        @property
        def _export_entries(self):
            return list(self._exported_functions.values())

    base = EXTENSION.rsplit(".", 1)[1]
    cc = _InOrder(base)
    cc.verbose = False
    cc.target_cpu = os.environ.get("FLOWHERD_AOT_CPU", "host") if cpu is None else cpu
    if output is None:
        output = _HERE / cc.output_file
    output = Path(output)
    cc.output_dir = str(output.parent)
    cc.output_file = output.name
    for name, signature in EXPORTS.items():
        module, fn = name.rsplit(".", 1)
        obj = getattr(importlib.import_module(module), fn)
        spec = getattr(obj, "_flowherd_kernel", None)  # imported on the AOT path already
        cc.export(_export_name(name), signature)((obj if spec is None else _jit_of(spec)).py_func)
    env: dict[str, Any] = {}
    exec(f"def source_digest():\n    return {source_digest()}\n", env)
    cc.export("source_digest", "i8()")(env["source_digest"])
    output.parent.mkdir(parents=True, exist_ok=True)
    cc.compile()
    return output
