"""Build hook: compile the engine's numba kernels ahead of time (`flowherd.engine.aot`).

Everything else about the package is in pyproject.toml. The extension is optional: if the
compile fails (no C compiler, a kernel edited so that its exported signature no longer fits),
the install goes on with a warning and numba compiles the kernels on first use, as before.
"""

import importlib
import sys
import types
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SRC = Path(__file__).resolve().parent / "src"
AOT = "flowherd.engine._kernels_aot"


def _load_aot():
    """`flowherd.engine.aot` without running the packages' __init__ (they import scipy, pydantic
    ...; the build environment has numba and numpy only)."""
    for pkg in ("flowherd", "flowherd.engine"):
        if pkg not in sys.modules:
            mod = types.ModuleType(pkg)
            mod.__path__ = [str(SRC / pkg.replace(".", "/"))]
            sys.modules[pkg] = mod
    return importlib.import_module("flowherd.engine.aot")


class BuildKernels(build_ext):
    def build_extension(self, ext):
        if ext.name != AOT:
            return super().build_extension(ext)
        out = Path(self.get_ext_fullpath(ext.name))
        print(f"flowherd: compiling the engine's kernels ahead of time into {out.name} "
              "(about a minute)", flush=True)
        try:
            _load_aot().build(out)
        except Exception as e:  # optional: numba's JIT takes over (`flowherd.engine.aot`)
            print(f"flowherd: warning: ahead-of-time compile failed ({type(e).__name__}: "
                  f"{str(e).splitlines()[0] if str(e) else ''}); numba will compile the kernels "
                  "on first use", flush=True)
        return None


setup(ext_modules=[Extension(AOT, sources=[], optional=True)], cmdclass={"build_ext": BuildKernels})
