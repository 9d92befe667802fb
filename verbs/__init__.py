"""shift.verbs: the real verbs stack on the simulated NICs (issue 18).

- ``rdma_core``: rdma-core 59 (libibverbs, pyverbs, the example programs) built from the
  pyverbs source distribution on PyPI, with the project's libibverbs provider
  (``provider/shiftsim.c``) compiled against it;
- ``devices``: the sysfs tree and device nodes through which libibverbs finds and opens
  the simulated devices, and ``run`` for a program beside them (``shift run``).
"""
