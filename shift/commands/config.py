"""`shift config`: where the installed C artefacts are, for a C program's compile line.

The installed package carries the public headers and libshift.so (in the package
shift.native). Each option prints one line, in the order given:

    cc -std=c11 app.c $(shift config --cflags) $(shift config --libs) -o app

--libs includes an rpath, so the program finds libshift.so without LD_LIBRARY_PATH.
Exit status 2, one line on stderr, if the installation lacks an artefact.
"""

from __future__ import annotations

import argparse

from shift.errors import ShiftError

OPTIONS = {
    "include_dir": "the directory of shift.h and the other public headers",
    "lib_dir": "the directory of libshift.so",
    "cflags": "the compiler flags: -I<include-dir>",
    "libs": "the linker flags: -L<lib-dir> -Wl,-rpath,<lib-dir> -lshift",
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("config", help="print where the C headers and libshift.so are",
                       description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    for dest, text in OPTIONS.items():
        p.add_argument("--" + dest.replace("_", "-"), dest="wanted", action="append_const",
                       const=dest, help=text)
    p.set_defaults(run=run_config)


def lines(wanted: list[str]) -> list[str]:
    """The output lines for the options asked, in their order."""
    from shift import native

    gone = native.missing()
    if gone:
        raise ShiftError(f"this installation lacks {gone[0]} (reinstall: pip install shift-rdma, "
                         "or pip install -e . in a clone)")
    inc, lib = native.include_dir(), native.lib_dir()
    values = {"include_dir": str(inc), "lib_dir": str(lib), "cflags": f"-I{inc}",
              "libs": f"-L{lib} -Wl,-rpath,{lib} -lshift"}
    return [values[w] for w in wanted]


def run_config(args: argparse.Namespace) -> int:
    if not args.wanted:
        raise ShiftError("say what to print: --include-dir, --lib-dir, --cflags or --libs")
    print("\n".join(lines(args.wanted)))
    return 0
