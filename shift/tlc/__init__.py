"""The check harness: running TLC on the specification (discovery, configuration, output,
traces), the explorer as the other engine of `shift check` (`explorer`), and TLC's state
graph compared with the explorer's (`conformance`). The model (`shift.model`) imports
nothing of it."""
