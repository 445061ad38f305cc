"""MIPROv2 and GEPA (DSPy) as baselines: `playground baselines optimise` against a scripted OpenAI-compatible server on
127.0.0.1, and the frozen prompt deployed as `--harness prompt-opt:PROMPT.json`."""

from __future__ import annotations

import json
import re

import pytest

from playground.agents.llm import SYSTEM_PROMPT
from playground.host.manager import get_host
from playground.run.validation import resolve_tasks
from playground.testing.openai_server import ScriptedChatServer
from tests.conftest import require_extra, run_cli

HINT = "Give the number only, nothing else."


def formula_answers(split: str, count: int) -> dict[str, str]:
    """question -> the expert's answer, for the first `count` Formula tasks of `split`."""
    from playground.plugins.baselines.prompt_search import load_tasks

    host = get_host()
    provider = host.envs.get("finance").provider
    _, _, ids = resolve_tasks(host, "finance", "formula", split, count)
    return {t.question.strip(): t.gold for t in load_tasks(provider, "formula", ids)}


class ScriptedModel:
    """A scripted model for both sides of prompt optimisation.

    As the agent (its system prompt is the llm agent's) it knows each question's answer, but writes it as a bare
    number only when its prompt holds HINT; otherwise it wraps it in prose, which the env scores 0. As the
    optimisers' proposer or reflector (DSPy's chat or JSON adapter) it fills every output field, proposing HINT
    for any field that is an instruction.
    """

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def __call__(self, body: dict) -> str:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if system == SYSTEM_PROMPT:
            current = user.split("Current observation:\n", 1)[1]
            gold = next(a for q, a in self.answers.items() if current.startswith(q[:700]))
            return f"Thought: compute it\nAction: {gold}" if HINT in user else f"Thought: compute it\nAction: " \
                                                                               f"The answer is {gold}"
        if "Your output fields are:" not in system:
            return "OK"  # the command's one-token probe of the endpoint, before the optimiser starts
        section = system.split("Your output fields are:", 1)[1].split("All interactions", 1)[0]
        values = {name: HINT if "instruction" in name else "A short note." for name in re.findall(r"`(\w+)`", section)}
        if "Outputs will be a JSON object" in system:
            return json.dumps(values)
        fields = "\n\n".join(f"[[ ## {name} ## ]]\n{value}" for name, value in values.items())
        return fields + "\n\n[[ ## completed ## ]]"


def prose_proposer(agent: ScriptedModel):
    """`agent` as the agent; as the optimisers' proposer or reflector, HINT in prose, in neither of DSPy's formats
    (as SmolLM2-135M answers)."""
    return lambda body: agent(body) if body["messages"][0]["content"] == SYSTEM_PROMPT else HINT


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["miprov2", "gepa"])
def test_optimise_on_dev_then_deploy_the_prompt_frozen_as_a_harness(tmp_path, optimizer):
    require_extra("prompt-opt", "dspy")
    answers = {**formula_answers("dev", 6), **formula_answers("test", 2)}
    prompt = tmp_path / "prompt.json"
    with ScriptedChatServer(default=ScriptedModel(answers)) as server:
        done = run_cli("baselines", "optimise", "--optimizer", optimizer, "--env", "finance:formula", "--split", "dev",
                       "--setting", "train=3", "--setting", "val=3", "--setting", "candidates=2",
                       "--setting", "trials=2", "--setting", "demos=1", "--setting", "metric_calls=12",
                       "--llm-base-url", server.base_url, "--model", "m", "--out", str(prompt))
        assert done.returncode == 0, done.stderr
        written = json.loads(prompt.read_text())
        # the optimiser found the instruction that makes the scripted agent score, graded by the env on dev tasks
        assert written["instructions"] == HINT
        assert written["dev_score"] == {"seed": 0.0, "optimised": 1.0, "val_tasks": 3}
        assert written["optimizer"] == optimizer and written["split"] == "dev"
        assert all(t.startswith("formula-1") for t in written["train_tasks"] + written["val_tasks"])  # dev seeds
        assert written["lm_calls"] > 0 and written["proposer_calls"] > 0
        # every call is capped as the agent's own client caps it (`max_tokens`): llama.cpp's server ignores
        # `max_completion_tokens`, which litellm's `openai/` provider sends, and then generates to the context's end
        probe, *optimiser = server.requests  # first, one one-token request: does the endpoint answer at all
        assert probe["max_tokens"] == 1 and probe["messages"] == [{"role": "user", "content": "Reply with OK."}]
        assert optimiser and all(r.get("max_tokens") == 256 and "max_completion_tokens" not in r
                                 for r in optimiser)

        listed = run_cli("harnesses")
        assert "prompt-opt:" in listed.stdout
        run_dir = tmp_path / "run"
        before = len(server.requests)
        done = run_cli("run", "--env", "finance:formula", "--split", "test", "--episodes", "2", "--agent", "llm",
                       "--llm-base-url", server.base_url, "--model", "m", "--harness", "base",
                       "--harness", f"prompt-opt:{prompt}", "--out", str(run_dir), "--quiet")
        assert done.returncode == 0, done.stderr
        deployed = server.requests[before:]
        summary = json.loads((run_dir / "summary.json").read_text())
        rates = {name: row["success_rate"] for name, row in summary["harnesses"].items()}
        assert rates == {"base": 0.0, f"prompt-opt:{prompt}": 1.0}
        # the note reached the agent's prompt under the frozen harness, and only there
        with_note = [r for r in deployed if HINT in r["messages"][-1]["content"]]
        assert len(with_note) == 2 and len(deployed) == 4
        traces = list((run_dir / "traces").glob("prompt-opt*/*.jsonl"))
        assert len(traces) == 2 and all(HINT in t.read_text() for t in traces)  # the trace keeps the note
        assert not any(HINT in t.read_text() for t in (run_dir / "traces" / "base").glob("*.jsonl"))

        # the same command resumes the run; a prompt file that changed since is refused (its hash is in the harness)
        again = ["run", "--env", "finance:formula", "--split", "test", "--episodes", "2", "--agent", "llm",
                 "--llm-base-url", server.base_url, "--model", "m", "--harness", "base",
                 "--harness", f"prompt-opt:{prompt}", "--out", str(run_dir), "--quiet"]
        assert run_cli(*again).returncode == 0
        prompt.write_text(json.dumps({**written, "instructions": "Something else."}))
        refused = run_cli(*again)
        assert refused.returncode == 2 and "defined differently" in refused.stderr


def test_a_bad_prompt_file_is_refused_naming_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    done = run_cli("run", "--env", "finance:formula", "--agent", "oracle", "--episodes", "1",
                   "--harness", f"prompt-opt:{bad}", "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert str(bad) in done.stderr and "not JSON" in done.stderr

    bad.write_text(json.dumps({"format": "playground-prompt/1", "instructions": "", "demos": []}))
    done = run_cli("run", "--env", "finance:formula", "--agent", "oracle", "--episodes", "1",
                   "--harness", f"prompt-opt:{bad}", "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and str(bad) in done.stderr and "nothing to show" in done.stderr

    missing = tmp_path / "missing.json"
    done = run_cli("run", "--env", "finance:formula", "--agent", "oracle", "--episodes", "1",
                   "--harness", f"prompt-opt:{missing}", "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and str(missing) in done.stderr


def test_the_prompt_note_is_the_same_text_the_optimiser_showed():
    from playground.plugins.baselines.prompt_opt import FORMAT, PromptNote, render_note

    demos = [{"question": "What is 2 + 2?", "answer": "4.0"}]
    note = render_note(HINT, demos)
    assert note.startswith(f"Instructions for this task:\n{HINT}") and "Question: What is 2 + 2?\nAnswer: 4.0" in note
    assert render_note("", demos).startswith("Solved examples")
    assert FORMAT == "playground-prompt/1"
    with pytest.raises(ValueError, match="needs a prompt file"):
        PromptNote({})


def test_optimise_refuses_a_test_split(tmp_path):
    done = run_cli("baselines", "optimise", "--optimizer", "gepa", "--env", "finance:formula", "--split", "test",
                   "--llm-base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path / "p.json"))
    assert done.returncode == 2 and "test split" in done.stderr
    assert not (tmp_path / "p.json").exists()


def test_optimise_against_an_endpoint_that_does_not_answer_stops_at_once_naming_it(tmp_path):
    require_extra("prompt-opt", "dspy")
    with ScriptedChatServer() as server:
        url = server.base_url  # closed once the block ends: nothing answers there
    done = run_cli("baselines", "optimise", "--optimizer", "miprov2", "--env", "finance:formula",
                   "--llm-base-url", url, "--model", "m", "--out", str(tmp_path / "p.json"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "the agent's endpoint does not answer" in done.stderr and "Connection refused" in done.stderr
    assert not (tmp_path / "p.json").exists()


@pytest.mark.parametrize("setting, named", [
    ("bogus=1", ["'bogus'", "unknown setting", "bogus=1", "known: train, val,", "max_tokens"]),
    ("trials=0", ["'trials'", "greater than or equal to 1", "got 0"]),
    ("lean_proposer=yes", ["'lean_proposer'", "valid boolean", "got 'yes'"]),
])
def test_optimise_names_an_unknown_or_out_of_bounds_setting(tmp_path, setting, named):
    done = run_cli("baselines", "optimise", "--optimizer", "gepa", "--env", "finance:formula", "--setting", setting,
                   "--llm-base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(tmp_path / "p.json"))
    assert done.returncode == 2, done.stderr
    assert all(part in done.stderr for part in named), done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "p.json").exists()


def test_optimise_settings_default_as_the_options_did_and_are_listed_in_its_help():
    from playground.plugins.baselines.optimise_settings import OptimiseSettings, parse_settings
    from playground.plugins.baselines.prompt_search import Budget

    defaults = parse_settings(())
    assert defaults == OptimiseSettings() and defaults.api_key_env == "OPENAI_API_KEY"
    assert (defaults.train, defaults.val, defaults.seed) == (8, 8, 0)
    assert (defaults.max_obs_chars, defaults.max_tokens) == (800, 256)
    budget = Budget()
    assert all(getattr(defaults, name) == getattr(budget, name) for name in budget.__dataclass_fields__)
    typed = parse_settings(("raw_proposals=true", "api_key_env=123", "demos=0", "reflection_base_url=http://h:1/v1"))
    assert (typed.raw_proposals, typed.api_key_env, typed.demos) == (True, "123", 0)  # a text setting stays text
    assert typed.reflection_base_url == "http://h:1/v1"
    done = run_cli("baselines", "optimise", "--help")
    assert done.returncode == 0
    assert all(f"{name}=" in done.stdout for name in OptimiseSettings.model_fields)
    assert "metric_calls=30" in done.stdout and "lean_proposer=false" in done.stdout


@pytest.mark.slow
def test_miprov2_with_a_proposer_whose_replies_do_not_parse_stops_or_takes_them_raw(tmp_path):
    """SmolLM2-135M as MIPROv2's proposer answers in neither of DSPy's formats, and MIPROv2 does not catch that:
    the command stops with a clear error, or with `--setting raw_proposals=true` takes each such reply as the instruction."""
    require_extra("prompt-opt", "dspy")
    model = prose_proposer(ScriptedModel(formula_answers("dev", 4)))
    command = ["baselines", "optimise", "--optimizer", "miprov2", "--env", "finance:formula", "--setting", "train=2",
               "--setting", "val=2", "--setting", "candidates=2", "--setting", "trials=3", "--setting", "demos=0",
               "--model", "m",
               "--out", str(tmp_path / "p.json")]
    with ScriptedChatServer(default=model) as server:
        done = run_cli(*command, "--llm-base-url", server.base_url)
        assert done.returncode == 2, done.stderr
        assert "proposer (m) gave a reply DSPy cannot parse" in done.stderr and "Traceback" not in done.stderr
        assert "--setting raw_proposals=true" in done.stderr and "--raw-proposals" not in done.stderr
        assert not (tmp_path / "p.json").exists()

        # the named deviation: each such reply is taken whole as the instruction, and the search then finds it
        done = run_cli(*command, "--llm-base-url", server.base_url, "--setting", "raw_proposals=true")
    assert done.returncode == 0, done.stderr
    written = json.loads((tmp_path / "p.json").read_text())
    assert written["instructions"] == HINT and written["dev_score"]["optimised"] == 1.0
    assert written["raw_proposals_taken"] >= 1 and written["budget"]["raw_proposals"] is True


@pytest.mark.slow
def test_gepa_with_a_reflector_in_prose_keeps_the_seed_unless_its_replies_are_taken_raw(tmp_path):
    """GEPA skips a reflection DSPy cannot parse, so a reflector that answers in prose changes nothing; with
    `--setting raw_proposals=true` its reply is the new instruction, which the search then scores."""
    require_extra("prompt-opt", "dspy")
    model = prose_proposer(ScriptedModel(formula_answers("dev", 6)))
    command = ["baselines", "optimise", "--optimizer", "gepa", "--env", "finance:formula", "--setting", "train=3",
               "--setting", "val=3", "--setting", "metric_calls=12", "--model", "m"]
    with ScriptedChatServer(default=model) as server:
        strict = run_cli(*command, "--llm-base-url", server.base_url, "--out", str(tmp_path / "strict.json"))
        raw = run_cli(*command, "--llm-base-url", server.base_url, "--setting", "raw_proposals=true",
                      "--out", str(tmp_path / "raw.json"))
    assert strict.returncode == 0 and raw.returncode == 0, strict.stderr + raw.stderr
    kept = json.loads((tmp_path / "strict.json").read_text())
    found = json.loads((tmp_path / "raw.json").read_text())
    assert kept["instructions"] == kept["seed_instructions"] and kept["dev_score"]["optimised"] == 0.0
    assert kept["raw_proposals_taken"] == 0
    assert found["instructions"] == HINT and found["dev_score"]["optimised"] == 1.0
    assert found["raw_proposals_taken"] >= 1
