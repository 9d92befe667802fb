"""The TLA+ specification, shipped as package data (the .tla modules and designs.toml);
`catalog`, the loader of designs.toml, and `workloads`, the reader of Workloads.tla's
programs."""
