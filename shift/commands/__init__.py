"""The subcommands of `shift`: each module has `register(subparsers)` and `run(args)`."""
