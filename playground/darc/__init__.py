"""DARC (diagnosis before recovery): profile failures, gather evidence, distil and deploy a recovery chain.

`profile` runs the base agent with detect-only detectors and diagnoses the dominant
failure mode; `evaluate` runs each admissible intervention on the train tasks into an
evidence table; `evidence` reads and writes that table; `distill` scores every
short-circuit chain of interventions on it and picks the one to freeze; `frontier` plots
the candidates' cost against their success; `policy` deploys a frozen chain as a cascade.
"""
