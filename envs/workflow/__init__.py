"""`workflow`: structured tool workflows (schedule-form, travel planning, ETL, navigation, diagnosis) as a playground
env plugin.

Deterministic finite-state domains whose subtask instances declare their interfaces (read
and write sets) and effect policies, with controlled observable failures (see
docs/envs/workflow.md). Registers the env `workflow`.
"""

from playground.core.hookspecs import hookimpl


@hookimpl
def register_envs(register) -> None:
    """Register the `workflow` env."""
    from playground.envs.workflow.env import WorkflowProvider

    register(WorkflowProvider())
