"""shift.impl: the native SHIFT core (native/) from Python. API in progress."""
