"""The TLA+ specification, shipped as package data (the .tla modules and designs.toml)."""
