"""shift: a formal model and a reference implementation of cross-NIC RDMA failover (SHIFT)."""

__version__ = "0.1.0"
