"""DART on AppWorld: effect policies from the API docs, the cells' declared structure, and (after
`playground envs setup appworld`) rollbacks on the real AppWorld engine: blocked across a sent payment,
admitted across reads only and restored by replay."""

from __future__ import annotations

import json

from playground.envs.appworld.cells import bindings, blamed
from playground.envs.appworld.effects import Routes, effect_policy, effect_table
from playground.plugins.dart.figures import episode_figures
from playground.plugins.dart.sidecar import Dart
from playground.testing import ScriptedAgent, play
from tests.test_appworld import appworld_cache, needs_server, provider  # noqa: F401 (fixtures)

TYPE_ERROR = """Execution failed. Traceback:
  File "<python-input>", line 2, in <module>
    print(me["email"], apis.venmo.show_account(access_token=venmo_token))
          ~~^^^^^^^^^
TypeError: list indices must be integers or slices, not str"""
MISSING_RECORD = """Execution failed. Traceback:
  File "<python-input>", line 1, in <module>
    print(apis.venmo.create_transaction(receiver_email=mike_email, amount=3, access_token=venmo_token))
Exception: Response status code is 409:
{"message":["The user with email nobody@example.com does not exist."]}"""
UNAUTHORIZED = """Execution failed. Traceback:
  File "<python-input>", line 1, in <module>
    print(apis.venmo.create_transaction(receiver_email=mike_email, amount=3, access_token=venmo_token))
Exception: Response status code is 401:
{"message":"You are either not authorized to access this venmo API endpoint or your access token is missing"}"""
PAY = "print(apis.venmo.create_transaction(receiver_email=mike_email, amount=3, access_token=venmo_token))"


def test_the_effect_policy_rule_reads_method_and_description():
    def doc(method, description):
        return {"method": method, "description": description}

    assert effect_policy(doc("POST", "Send money to a user.")) == "irreversible"
    assert effect_policy(doc("POST", "Forward entire email thread to one or more recipients.")) == "irreversible"
    assert effect_policy(doc("POST", "Place an order for all the items in your cart.")) == "irreversible"
    assert effect_policy(doc("GET", "Send nothing: a read.")) == "reversible"  # GET reads, whatever it says
    assert effect_policy(doc("POST", "Create a new note.")) == "reversible"
    assert effect_policy(doc("POST", "Record a new payment for an expense. This only records payment on splitwise "
                                     "and does not move real money.")) == "reversible"
    docs = {"pay": {"send": {"method": "POST", "path": "/pay/requests/{request_id}/send", "description": "Send it."},
                    "sends": {"method": "POST", "path": "/pay/requests/all/send", "description": "Note it."},
                    "show": {"method": "GET", "path": "/pay/requests/{request_id}", "description": "Show it."}}}
    routes = Routes(docs)
    assert routes.call("post", "/pay/requests/12/send") == ("pay.send", "irreversible")
    assert routes.call("post", "/pay/requests/all/send") == ("pay.sends", "reversible")  # the literal path wins
    assert routes.call("get", "http://x:1/pay/requests/7") == ("pay.show", "reversible")
    assert routes.call("delete", "/pay/unknown") == ("DELETE /pay/unknown", "irreversible")  # unknown: at its worst
    assert effect_table(docs)["pay"] == {"send": "irreversible", "sends": "reversible", "show": "reversible"}


def test_a_cell_declares_what_it_reads_and_writes_and_an_error_blames_earlier_variables():
    cell = ("for f in friends:\n    print(f)\nme = apis.supervisor.show_profile()\n"
            "def g(x):\n    y = x\nimport json as j")
    found = bindings(cell)
    assert found.writes == {"f", "me", "g", "j"} and {"friends", "print", "apis"} <= found.loads
    assert not found.dynamic and bindings("globals()['x'] = 1").dynamic and bindings("del x").dynamic
    earlier = {"me", "mike_email", "venmo_token"}
    cell = 'x = 1\nprint(me["email"], apis.venmo.show_account(access_token=venmo_token))'
    assert blamed(cell, TYPE_ERROR, "api_error", earlier) == ["me"]  # not the token
    assert blamed(PAY, MISSING_RECORD, "missing_lookup", earlier) == ["mike_email"]
    assert blamed(PAY, UNAUTHORIZED, "missing_login", earlier) == ["venmo_token"]  # a 401 blames the token only
    assert blamed(PAY, MISSING_RECORD, "unknown_api", earlier) == []  # the cell's own code
    rebound = 'me = apis.supervisor.show_profile()\nprint(me["email"], apis.venmo.show_account(access_token=t))'
    assert blamed(rebound, TYPE_ERROR, "api_error", earlier) == []  # bound in this cell before the failing line


# -- on the real AppWorld engine ---------------------------------------------------------------------------

READ = "me = apis.supervisor.show_account_passwords()"  # reads the wrong record (a list), silently
USE = 'print(me["email"])'  # ... so this fails, and AppWorld's error blames `me`


def decisions(played) -> list[dict]:
    return [e["details"] for e in played.of("intervention")]


@needs_server
def test_effect_policies_come_from_appworlds_api_docs(provider):  # noqa: F811
    env = provider.make("embedded")
    table = effect_table(env.server.api_docs())
    irreversible = {f"{app}.{api}" for app, apis in table.items() for api, policy in apis.items()
                    if policy == "irreversible"}
    for api in ("venmo.create_transaction", "venmo.approve_payment_request", "venmo.create_payment_request",
                "gmail.send_email", "gmail.reply_to_email", "phone.send_text_message", "amazon.place_order"):
        assert api in irreversible, api
    for api in ("venmo.show_transactions", "venmo.login", "simple_note.create_note", "todoist.update_task",
                "splitwise.record_payment", "spotify.add_song_to_playlist", "supervisor.complete_task"):
        app, name = api.split(".")
        assert table[app][name] == "reversible", api
    assert len(irreversible) == 35 and sum(len(apis) for apis in table.values()) == 457  # as docs/envs/appworld.md
    env.close()


@needs_server
def test_a_rollback_across_a_sent_payment_is_blocked_and_named(provider):  # noqa: F811
    env = provider.make("embedded", expert=True)
    task = "pg01_1"  # send $25 to Mike on Venmo
    env.reset(options={"task": task})
    login, lookup, pay, _ = env.solution
    script = [login, READ, lookup, pay, USE]  # the read, the payment (not a consumer of it), then the failure
    played = play(env, ScriptedAgent(script), plugins=[Dart()], task=task, max_steps=12,
                  params={"max_rollbacks": 10})
    steps = played.of("step")
    (paid,) = steps[3]["structure"]["instances"]
    assert paid["effect"] == "irreversible" and paid["label"] == "venmo.create_transaction"
    assert steps[4]["failure"]["keys"] == ["me"] and not steps[4]["valid_action"]
    (detail,) = decisions(played)
    assert detail["decision"] == "rerun" and detail["blocked"] and detail["instance"] == "cell1"
    assert "irreversible effect of cell3 [venmo.create_transaction]" in detail["reason"]
    assert list(detail["irreversible"]) == ["cell3 [venmo.create_transaction]"]
    assert played.of("rollback")[0]["to_step"] == 0  # the whole task again, as a new attempt
    assert played.result.status == "won" and env.world["unsafe_restores"] == 0
    # without the irreversible-effect check the same rollback is admitted and undoes the sent payment
    unsafe = play(env, ScriptedAgent(script), plugins=[Dart({"effect_check": False})], task=task, max_steps=12,
                  params={"max_rollbacks": 10})
    assert decisions(unsafe)[0]["decision"] == "rollback" and env.world["unsafe_restores"] == 1
    # DART's study columns read the same ground truth from the traces (the env's, written by the loop)
    assert episode_figures(played.trace)["unsafe"] == 0 and episode_figures(played.trace)["blocked"] == 1
    assert episode_figures(unsafe.trace)["unsafe"] == 1 and episode_figures(unsafe.trace)["false_blocks"] == 0
    env.close()


@needs_server
def test_a_rollback_across_reads_only_is_admitted_and_restores_by_replay(provider):  # noqa: F811
    env = provider.make("embedded", expert=True)
    task = "pg01_1"
    env.reset(options={"task": task})
    login = env.solution[0]
    probe = "print('me' in dir(), 'venmo_token' in dir())"
    # the 4th cell is proposed while the failure is pending: the rollback takes its place
    played = play(env, ScriptedAgent([login, READ, USE, "pass", probe]), plugins=[Dart()], task=task,
                  max_steps=12, params={"max_rollbacks": 10})
    (detail,) = decisions(played)
    assert detail["decision"] == "rollback" and not detail["blocked"] and "irreversible" not in detail
    assert detail["reason"] == "no committed consumer or irreversible effect crossed"
    (rollback,) = played.of("rollback")
    assert rollback["to_step"] == 1 == detail["candidate"]  # the faulty read's entry
    after = played.of("step")[3]
    assert after["step"] == 1 and after["action"] == probe
    assert after["observation"].strip() == "False True"  # a fresh world replayed the login cell, not the read
    assert played.result.status == "won" and env.world["unsafe_restores"] == 0
    assert env.cells[:2] == [login, probe]
    env.close()


@needs_server
def test_dart_runs_on_appworld_through_the_cli_and_traces_carry_the_declared_calls(tmp_path):
    from playground.cli.main import main

    out = tmp_path / "run"
    assert main(["run", "--env", "appworld", "--agent", "noisy", "--harness", "dart", "--episodes", "2",
                 "--max-steps", "12", "--out", str(out), "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["harnesses"]["dart"]["errors"] == 0
    trace = [json.loads(line) for line in (out / "traces" / "dart" / "pg01_1.jsonl").read_text().splitlines()]
    calls = [c for e in trace if e["type"] == "step" and "structure" in e
             for i in e["structure"]["instances"] for c in i["calls"]]
    assert {"api": "venmo.create_transaction", "effect": "irreversible"} in calls
