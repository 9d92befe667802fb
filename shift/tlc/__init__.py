"""Running TLC on the specification: discovery, configuration, output, traces."""
