"""Build hooks for the native core.

- ``shift.impl._native``: the cffi extension (API mode, out of line), from impl/_build.py;
- ``libshift.so``: the same C sources as a shared library for C programs, installed with
  the public headers in the package ``shift.native`` (``shift config`` prints where).

Everything else about the package lives in pyproject.toml.
"""

from __future__ import annotations

import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "impl"))
from _build import SOURCES  # noqa: E402 - the one list of the core's C sources

LIBRARY = "libshift.so"
C_FLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra"]


class build_ext_with_library(build_ext):
    """build_ext, then libshift.so beside the package ``shift.native`` (its ``lib/``):
    in the build tree for a wheel, in native/lib/ for an editable install."""

    def run(self) -> None:
        super().run()
        self.build_library()

    def library_path(self) -> str:
        # where an extension module shift.native.lib.X would go: honours --inplace
        return os.path.join(os.path.dirname(self.get_ext_fullpath("shift.native.lib.x")),
                            LIBRARY)

    def build_library(self) -> None:
        sources = [os.path.join("native", "src", s) for s in SOURCES]
        out = self.library_path()
        if not self.force and not any(_newer(s, out) for s in _inputs(sources)):
            return
        os.makedirs(os.path.dirname(out), exist_ok=True)
        objects = self.compiler.compile(
            sources, output_dir=os.path.join(self.build_temp, "libshift"),
            include_dirs=[os.path.join("native", "include"), os.path.join("native", "src")],
            extra_postargs=C_FLAGS + ["-fPIC"])
        self.compiler.link_shared_object(objects, out,
                                         extra_postargs=[f"-Wl,-soname,{LIBRARY}"])

    def get_outputs(self) -> list[str]:
        return [*super().get_outputs(), self.library_path()]


def _inputs(sources: list[str]) -> list[str]:
    headers = [os.path.join(d, f) for d in (os.path.join("native", "include"),
                                            os.path.join("native", "src"))
               for f in os.listdir(d) if f.endswith(".h")]
    return sources + headers


def _newer(src: str, out: str) -> bool:
    return not os.path.exists(out) or os.path.getmtime(src) > os.path.getmtime(out)


setup(cffi_modules=["impl/_build.py:ffibuilder"],
      cmdclass={"build_ext": build_ext_with_library})
