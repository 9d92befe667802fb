"""Reading TLA+: modules and the values TLC prints, through the tree-sitter-tlaplus grammar.

`syntax` parses (a module's definitions, the assignments to a variable); `values` turns a
constant expression into Python values. Both the model (`shift.model`: the design's record
D, a bound's constants) and the TLC harness (`shift.tlc`: states in traces and dumps) read
TLA+ through this package; it imports neither of them.
"""
