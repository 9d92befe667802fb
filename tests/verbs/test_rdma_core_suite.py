"""rdma-core's own tests (its `tests/`, from the same source as the library) against the
provider (issue 18, item 5): every test passes or skips, for a reason docs/verbs.md
counts (another vendor's device, a feature the provider does not offer, the link layer,
this machine). Any failure or error fails this test, as does a skip for a reason not in
that list, or one of the tests that once failed here (MUST_PASS) no longer passing."""

from __future__ import annotations

import re
import uuid

import pytest
from shift.verbs import devices
from shift.verbs.rdma_core import Build

pytestmark = pytest.mark.xdist_group("verbs")

# traffic and attributes the provider must carry (rdma-core's tests connect two QPs of
# one process): each of these was a failure or an error once (docs/verbs.md)
MUST_PASS = ["test_atomic.AtomicTest.test_atomic_fetch_and_add",
             "test_atomic.AtomicTest.test_atomic_cmp_and_swap",
             "test_atomic.AtomicTest.test_atomic_invalid_rkey",
             "test_atomic.AtomicTest.test_atomic_invalid_qp_access",
             "test_relaxed_ordering.RoTestCase.test_ro_rc_traffic",
             "test_device.DeviceTest.test_query_gid_table",
             # random SGE counts (random_qp_cap: 1 to max_sge / 2)
             "test_qp.QPTest.test_create_rc_qp_no_attr",
             "test_qp.QPTest.test_create_rc_qp_with_attr",
             # and a random creation mask (ibv_create_qp_ex: a PD, no creation flags)
             "test_qp.QPTest.test_create_rc_qp_ex_no_attr",
             "test_qp.QPTest.test_create_rc_qp_ex_with_attr",
             "test_qp.QPTest.test_query_rc_qp",
             # RC traffic through a completion channel (libshiftsim-channel.so)
             "test_cq_events.CqEventsTestCase.test_cq_events_rc",
             "test_cq.CQAPITest.test_create_cq_with_comp_channel",
             # the P_Key from /sys/class/infiniband, max_msg_sz above 4 KiB
             "test_device.DeviceTest.test_get_pkey_index",
             "test_device.DeviceTest.test_query_port",
             # UD QPs (ud.c): their life, queries, traffic, a completion channel
             "test_qp.QPTest.test_create_ud_qp_no_attr",
             "test_qp.QPTest.test_create_ud_qp_with_attr",
             "test_qp.QPTest.test_create_ud_qp_ex_no_attr",
             "test_qp.QPTest.test_modify_ud_qp",
             "test_qp.QPTest.test_query_ud_qp",
             "test_relaxed_ordering.RoTestCase.test_ro_ud_traffic",
             "test_cq_events.CqEventsTestCase.test_cq_events_ud"]
# Why a test is skipped: the reason rdma-core gives, matched to what docs/verbs.md counts.
# A skip whose reason is in none of them fails the test (the table is then stale).
SKIP_REASONS = {
    "another vendor's device": r"non (MLX5|EFA) device|not an MLX5 device|FDs file not "
                               r"found|PCI device must be passed|No supported port is up",
    "a feature the provider does not offer":
        r"(Extended QP|Device memory|ODP|Extended CQ|Create Extended CQ|Create XRCD|"
        r"Create (UD|UC|RC) QP .*|Create QP type \d+|Create MW|Create memory window .*|"
        r"Rereg MR|Parent Domain|Create SRQ|Create AH|Query device real time|Resize CQ) is not "
        r"supported|No ODP caps",
    "an InfiniBand link layer, not Ethernet": r"net interface|Ethernet link layer|"
                                               r"is InfiniBand , skip RoCE",
    "one GID per port": r"All gid indices populated",
    "this machine: no GPU, CUDA or huge pages": r"dmabuf is not supported by /dev/dri|"
                                                 r"cuda-python|no huge pages",
}
# "test_x (tests.mod.Class.test_x)", perhaps its docstring's line, " ... ", perhaps a line
# the test printed, then the outcome
LINE = re.compile(r"^(test_\w+) \(tests\.([\w.]+)\)(?:\n[^\n]*?)? \.\.\. (?:[^\n]*\n)?"
                  r"(ok|skipped|ERROR|FAIL)(?: ['\"](.*)['\"]$)?", re.M)


def outcomes(log: str) -> dict[str, tuple[str, str]]:
    """Each test's outcome and, for a skip, its reason."""
    return {test: (outcome, reason) for _, test, outcome, reason in LINE.findall(log)}


def skip_reason(reason: str) -> str | None:
    return next((why for why, pattern in SKIP_REASONS.items() if re.search(pattern, reason)),
                None)


def test_rdma_cores_suite_on_the_provider(rdma: Build) -> None:
    proc = devices.run(rdma, "A", ["run_tests.py", "--dev", "sim0", "-v"], capture_output=True,
                       timeout=600, env={"SHIFT_SIM_FABRIC": f"rdma-core-{uuid.uuid4().hex[:8]}"})
    seen = outcomes(proc.stderr)
    ran = re.search(r"^Ran (\d+) tests", proc.stderr, flags=re.M)
    assert ran and len(seen) == int(ran[1]) > 300, proc.stderr[-3000:]
    failed = sorted(t for t, (o, _) in seen.items() if o in ("ERROR", "FAIL"))
    assert not failed, (failed, proc.stderr[-5000:])
    assert re.search(r"^OK \(skipped=\d+\)$", proc.stderr, flags=re.M), proc.stderr[-3000:]
    unexplained = {t: r for t, (o, r) in seen.items() if o == "skipped" and not skip_reason(r)}
    assert not unexplained, unexplained
    assert all(seen.get(t, ("missing",))[0] == "ok" for t in MUST_PASS), \
        {t: seen.get(t) for t in MUST_PASS}


def test_every_skip_reason_of_the_docs_is_recognised() -> None:
    """The patterns are not vacuous: each recognises a reason rdma-core 59 gives."""
    for reason, why in [("Can not run the test over non MLX5 device", "another vendor's"),
                        ("Create UD QP with attrs is not supported", "a feature"),
                        ("Extended QP is not supported on this device", "a feature"),
                        ("Device sim0 doesn't have net interface", "an InfiniBand"),
                        ("All gid indices populated, cannot check bad flow", "one GID"),
                        ("cuda-python 12.0+ must be installed to run CUDA tests", "this machine")]:
        assert (skip_reason(reason) or "").startswith(why), reason
    assert skip_reason("Create RC QP is broken") is None
    assert skip_reason("something else entirely") is None
