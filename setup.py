"""Build hook for the native core: compiles shift.impl._native (cffi, API mode, out of line).

Everything else about the package lives in pyproject.toml.
"""

from setuptools import setup

setup(cffi_modules=["impl/_build.py:ffibuilder"])
