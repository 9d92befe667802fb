"""rdma-core for the simulated devices: one source gives a libibverbs, the provider's ABI,
pyverbs and the example programs that all agree.

A libibverbs provider must be built against the private ABI of the libibverbs that loads
it (``IBVERBS_PRIVATE_59`` here), and the headers it needs (``infiniband/driver.h``) are
not in Debian's ``libibverbs-dev``. The ``pyverbs`` source distribution on PyPI holds the
whole of rdma-core, so it is the one source: built in place (cmake ``IN_PLACE``) into a
cache directory, with the project's provider (``verbs/provider/shiftsim.c``) compiled
against that build and registered in its ``etc/libibverbs.d``. Nothing is installed
system-wide; ``shift run`` points programs at the build.

``ensure_built()`` does whatever is missing and is safe to call from several processes
at once (a file lock). ``python -m shift.verbs.rdma_core`` runs it with progress lines.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from shift.errors import ShiftError

VERSION = "59.0"
SDIST_URL = ("https://files.pythonhosted.org/packages/98/f5/"
             "c7f7425c53b313492f35cea6785fefe5d9b98040ce94a66a6f6354fc91ab/pyverbs-59.0.tar.gz")
SDIST_SHA256 = "b30d56bb620b3d3b4301876f9a04c964be1c76cc6553a451e1465f1c6ac9f20e"
PROVIDER_ABI = 59  # the -rdmavNN suffix libibverbs 59 loads providers by

# Debian packages the build needs, by the program or file that shows each is present.
DEBIAN_PACKAGES = {
    "cmake": "cmake", "ninja": "ninja-build", "pkg-config": "pkg-config",
    "/usr/include/libnl3/netlink/netlink.h": "libnl-3-dev",
    "/usr/include/libnl3/netlink/route/link.h": "libnl-route-3-dev",
    "/usr/include/libudev.h": "libudev-dev",
}
PROVIDER_DIR = Path(__file__).resolve().parent / "provider"
PROVIDER_SOURCES = ("shiftsim.c", "host.c", "queues.c", "control.c", "lockstep.c", "ud.c",
                    "sge.c")
CHANNEL_SOURCE = "channel.c"  # libshiftsim-channel.so: preloaded by shift run
BACKEND_SOURCE = Path(__file__).resolve().parent / "backend" / "ibv.c"

Progress = Callable[[str], None]


class BuildError(ShiftError):
    """rdma-core or the provider could not be built: what is missing, or the log."""


@dataclass(frozen=True)
class Build:
    """Where an rdma-core build keeps what `shift run` and the tests use."""

    root: Path

    @property
    def source(self) -> Path:
        return self.root / f"pyverbs-{VERSION}" / "rdma-core"

    @property
    def tree(self) -> Path:
        return self.root / "build"

    @property
    def lib(self) -> Path:
        return self.tree / "lib"

    @property
    def bin(self) -> Path:
        return self.tree / "bin"

    @property
    def python(self) -> Path:
        """The directory holding the built ``pyverbs`` package."""
        return self.tree / "python"

    @property
    def provider(self) -> Path:
        return self.lib / f"libshiftsim-rdmav{PROVIDER_ABI}.so"

    @property
    def backend(self) -> Path:
        """The layer's libibverbs backend (shift_ibv.h), built against this libibverbs."""
        return self.lib / "libshift_ibv.so"

    @property
    def channel_library(self) -> Path:
        """Completion channels for the simulated devices (``shift run`` preloads it)."""
        return self.lib / "libshiftsim-channel.so"

    @property
    def driver_file(self) -> Path:
        return self.tree / "etc" / "libibverbs.d" / "shiftsim.driver"

    def program(self, name: str) -> Path:
        return self.bin / name

    def complete(self) -> bool:
        if not (self.provider.is_file() and self.driver_file.is_file()
                and self.backend.is_file() and self.channel_library.is_file()
                and self.program("ibv_devinfo").is_file()):
            return False
        built = min(self.provider.stat().st_mtime, self.backend.stat().st_mtime)
        return all(built >= p.stat().st_mtime for p in provider_inputs())


def provider_inputs() -> list[Path]:
    """What the provider is built from: its sources and header, and the core it links."""
    from shift import native

    return ([PROVIDER_DIR / s for s in (*PROVIDER_SOURCES, CHANNEL_SOURCE, "shiftsim.h",
                                        "shiftsim_lockstep.h")]
            + [BACKEND_SOURCE]
            + [native.include_dir() / h for h in ("simnic.h", "shift.h", "shift_ibv.h")]
            + [native.lib_dir() / native.LIBRARY])


def default_root() -> Path:
    """``$SHIFT_VERBS_DIR``, else a cache directory per rdma-core and Python version
    (pyverbs is compiled for one interpreter)."""
    if os.environ.get("SHIFT_VERBS_DIR"):
        return Path(os.environ["SHIFT_VERBS_DIR"]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    py = sysconfig.get_config_var("SOABI") or f"py{sys.version_info[0]}{sys.version_info[1]}"
    return cache / "shift" / f"rdma-core-{VERSION}-{py}"


def missing_packages() -> list[str]:
    """The Debian packages the build needs and this machine lacks."""
    return sorted({pkg for probe, pkg in DEBIAN_PACKAGES.items()
                   if not (Path(probe).exists() if probe.startswith("/") else shutil.which(probe))})


def check_prerequisites() -> None:
    missing = missing_packages()
    if missing:
        raise BuildError("building rdma-core for the simulated devices needs Debian packages "
                         f"this machine lacks: apt-get install {' '.join(missing)}")
    try:
        import Cython  # noqa: F401 - pyverbs is Cython
    except ImportError:
        raise BuildError("building pyverbs needs Cython 3.0 in this Python: "
                         "pip install -e '.[verbs]' (cython>=3.0.12,<3.1)") from None


@contextmanager
def locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def fetch(build: Build, say: Progress) -> None:
    """The pyverbs sdist from PyPI, checked against its pinned digest, unpacked."""
    if build.source.is_dir():
        return
    archive = build.root / f"pyverbs-{VERSION}.tar.gz"
    if not archive.is_file():
        say(f"downloading rdma-core {VERSION} (the pyverbs source distribution, PyPI)")
        part = archive.with_suffix(".part")
        try:
            with urllib.request.urlopen(SDIST_URL, timeout=120) as r, open(part, "wb") as out:
                shutil.copyfileobj(r, out)
        except OSError as e:
            raise BuildError(f"cannot download {SDIST_URL}: {e}") from None
        part.rename(archive)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        archive.unlink()
        raise BuildError(f"{archive.name}: sha256 {digest}, expected {SDIST_SHA256}")
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4 and later
            tar.extractall(build.root, filter="data")
        else:
            tar.extractall(build.root)  # noqa: S202 - the archive's digest was checked


def run_logged(cmd: list[str], cwd: Path, log: Path, say: Progress | None = None) -> None:
    """cmd with its output in log; BuildError with the log's end if it fails. With say,
    every tenth of ninja's "[k/N]" steps is told as it goes."""
    told = 0
    with open(log, "w") as out, subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            m = re.match(r"\[(\d+)/(\d+)\]", line)
            if say and m and int(m[1]) * 10 // int(m[2]) > told:
                told = int(m[1]) * 10 // int(m[2])
                say(f"rdma-core: {told * 10}% ({m[1]} of {m[2]} steps)")
    if proc.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise BuildError(f"{cmd[0]} failed (exit {proc.returncode}); the end of {log}:\n"
                         + "\n".join(tail))


def compile_rdma_core(build: Build, say: Progress) -> None:
    """cmake + ninja, in place: binaries and pyverbs run from the build tree."""
    build.tree.mkdir(exist_ok=True)
    if not (build.tree / "build.ninja").is_file():
        say("configuring rdma-core (cmake)")
        run_logged(["cmake", "-GNinja", "-DIN_PLACE=1", "-DNO_MAN_PAGES=1",
                    "-DENABLE_RESOLVE_NEIGH=0", f"-DPYTHON_EXECUTABLE={sys.executable}",
                    str(build.source)], build.tree, build.root / "cmake.log")
    say("building rdma-core: libibverbs, pyverbs, the example programs (ninja, a few minutes)")
    run_logged(["ninja"], build.tree, build.root / "ninja.log", say)


def compile_provider(build: Build, say: Progress) -> None:
    """The provider, against this build's private headers and libibverbs, linking the
    core's simnic (libshift.so, from ``pip install``)."""
    from shift import native

    if native.missing():
        raise BuildError(f"the provider links the C core, and {native.missing()[0]} is "
                         "missing: pip install -e . (or reinstall shift)")
    say(f"building the provider {build.provider.name}")
    lib = native.lib_dir()
    run_logged([os.environ.get("CC", "cc"), "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                "-O2", "-g", "-fPIC", "-shared", "-pthread",
                "-isystem", str(build.tree / "include"), f"-I{native.include_dir()}",
                *(str(PROVIDER_DIR / s) for s in PROVIDER_SOURCES),
                f"-L{build.lib}", "-libverbs", f"-L{lib}", "-lshift",
                f"-Wl,-rpath,{build.lib}:{lib}", "-o", str(build.provider)],
               build.root, build.root / "provider.log")
    build.driver_file.write_text("driver shiftsim\n")
    # completion channels (channel.c), where libibverbs asks the kernel: shift run preloads it
    version_script = build.root / "channel.map"
    version_script.write_text("IBVERBS_1.0 { global: ibv_create_comp_channel; local: *; };\n")
    run_logged([os.environ.get("CC", "cc"), "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                "-O2", "-g", "-fPIC", "-shared", "-isystem", str(build.tree / "include"),
                str(PROVIDER_DIR / CHANNEL_SOURCE), f"-Wl,--version-script={version_script}",
                "-ldl", "-o", str(build.channel_library)], build.root, build.root / "provider.log")


def compile_backend(build: Build, say: Progress, source: Path = BACKEND_SOURCE,
                    out: Path | None = None) -> None:
    """The layer's libibverbs backend: ibv_* calls only, against this build's public
    headers (it runs over any provider; here the simulated one). source and out: another
    copy (the seeded bugs of tests/differential/seeded_bugs.py)."""
    from shift import native

    out = out or build.backend
    say(f"building the libibverbs backend {out.name}")
    run_logged([os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Wpedantic",
                "-Wshadow", "-Wstrict-prototypes", "-Werror", "-O2", "-g", "-fPIC", "-shared",
                "-isystem", str(build.tree / "include"), f"-I{native.include_dir()}",
                str(source), f"-L{build.lib}", "-libverbs",
                f"-Wl,-rpath,{build.lib}", "-o", str(out)],
               out.parent, out.parent / "backend.log")


def ensure_built(say: Progress = lambda _: None, root: Path | None = None) -> Build:
    """The rdma-core build with the provider, made now if it is missing or stale."""
    build = Build(root or default_root())
    if build.complete():
        return build
    check_prerequisites()
    with locked(build.root):
        if not build.complete():
            fetch(build, say)
            if not build.program("ibv_devinfo").is_file():
                compile_rdma_core(build, say)
            compile_provider(build, say)
            compile_backend(build, say)
    return build


def main() -> int:
    try:
        build = ensure_built(lambda line: print(f"shift verbs: {line}", file=sys.stderr))
    except ShiftError as e:
        print(f"shift verbs: {e}", file=sys.stderr)
        return 2
    print(build.tree)
    return 0


if __name__ == "__main__":
    sys.exit(main())
