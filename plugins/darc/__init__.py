"""DARC (diagnosis before recovery): profile failures, gather evidence, distil and deploy a recovery chain.

`profile` runs the base agent with detect-only detectors and diagnoses the dominant
failure mode; `evaluate` runs each admissible intervention on the train tasks into an
evidence table; `evidence` reads and writes that table; `distill` scores every
short-circuit chain of interventions on it and picks the one to freeze; `frontier` plots
the candidates' cost against their success; `policy` deploys a frozen chain as a cascade.
"""

from playground.core.hookspecs import hookimpl


@hookimpl
def register_harness_loaders(register) -> None:
    """`--harness darc:POLICY.json` deploys a frozen DARC policy as a cascade."""
    from playground.plugins.darc.policy import cascade_harness

    register("darc:", cascade_harness, description="deploy a frozen DARC policy (darc:POLICY.json) as a cascade")


@hookimpl
def register_commands(cli) -> None:
    """Add the `darc` command group."""
    from playground.plugins.darc.cli import darc_group

    cli.add_command(darc_group)
