"""Suite-wide ordering: the longest modules first.

pytest-xdist hands tests (and --dist loadgroup's groups) to its workers in collection
order, so a long module collected last runs alone at the end while the other workers
idle. Starting the longest ones first lets the short tests fill in beside them."""

from __future__ import annotations

import pytest

# The longest modules, longest first (wall time on 2 cores, `--durations`).
LONGEST = [
    "tests/test_trilemma.py",
    "tests/model/test_conformance.py",
    "tests/test_distributed.py",
    "tests/test_workflow.py",
    "tests/proofs/test_kill_table.py",
    "tests/test_extending.py",
    "tests/model/test_explain.py",
    "tests/test_nccl_port.py",
    "tests/test_report.py",
    # the xdist group "verbs": the rdma-core build (minutes) and then its tests
    "tests/verbs/test_devices.py",
    "tests/verbs/test_pingpong.py",
    "tests/verbs/test_faults.py",
    "tests/verbs/test_pyverbs_rc.py",
    "tests/verbs/test_perftest.py",
    "tests/verbs/test_rdma_core_suite.py",
    "tests/differential/test_seeded_bugs.py",
    "tests/impl/test_native_fuzz.py",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONGEST)}

    def key(item: pytest.Item) -> int:
        return rank.get(item.nodeid.split("::", 1)[0], len(LONGEST))

    items.sort(key=key)  # stable: each module keeps its own order
