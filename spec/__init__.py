"""The TLA+ specification, shipped as package data (the .tla modules and designs.toml), and
`catalog`, the loader of designs.toml."""
