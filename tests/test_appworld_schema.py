"""AppWorld's schema check of a code cell (`envs/appworld/schema.py`) on hand-written cells and docs,
and the noisy agent's wrong-keyword cells. No server needed."""

from __future__ import annotations

import pytest

from playground.core.payloads import PayloadError, SchemaProblem
from playground.envs.appworld.env import wrong_keyword
from playground.envs.appworld.interventions import describe_api
from playground.envs.appworld.schema import check_cell, signature

DOCS = {
    "venmo": {
        "login": {"description": "Log in.", "parameters": [{"name": "username", "required": True},
                                                           {"name": "password", "required": True}]},
        "create_transaction": {"description": "Send money.", "parameters": [
            {"name": "receiver_email", "required": True}, {"name": "amount", "required": True},
            {"name": "access_token", "required": True},
            {"name": "description", "required": False, "default": ""},
            {"name": "private", "required": False, "default": False}]},
        "search_friends": {"description": "Find friends.", "parameters": [
            {"name": "access_token", "required": True}, {"name": "query", "required": False, "default": ""},
            {"name": "page_limit", "required": False, "default": 5}]},
        "show_transactions": {"description": "List transactions.", "parameters": [
            {"name": "access_token", "required": True}]},
    },
    "spotify": {"search_songs": {"description": "Search songs.", "parameters": [
        {"name": "query", "required": False, "default": ""}]}},
    "supervisor": {"complete_task": {"description": "Done.", "parameters": [
        {"name": "answer", "required": False, "default": None}]}},
}


def kinds(cell: str) -> list[tuple[str, str]]:
    return [(p.kind, p.text) for p in check_cell(cell, DOCS)]


def test_a_valid_cell_and_cells_without_api_calls_pass():
    assert check_cell('token = apis.venmo.login(username="a@b.c", password="pw")["access_token"]\n'
                      'print(apis.venmo.create_transaction(receiver_email="x@y.z", amount=3, access_token=token,\n'
                      '                                    description="pizza"))\n'
                      "apis.supervisor.complete_task(answer=None)", DOCS) == []
    assert check_cell("import json\nrows = [r for r in range(3)]\nprint(json.dumps(rows))", DOCS) == []
    assert check_cell("", DOCS) == []
    assert check_cell("venmo = apis.venmo\nprint(venmo.anything())", DOCS) == []  # only what can be read statically


def test_an_unknown_app_names_the_closest_apps():
    [problem] = check_cell("apis.spotfy.search_songs(query='x')", DOCS)
    assert (problem.kind, problem.text, problem.line, problem.col) == ("unknown_api", "apis.spotfy", 1, 1)
    assert problem.alternatives[0] == "spotify" and "no app named 'spotfy'" in problem.message


def test_an_unknown_api_names_the_closest_apis_with_their_signatures():
    [problem] = check_cell("x = 1\nfriends = apis.venmo.search_friend(query='Mike', access_token=t)", DOCS)
    assert (problem.kind, problem.text, problem.line, problem.col) == ("unknown_api", "apis.venmo.search_friend",
                                                                      2, 11)
    assert problem.alternatives[0] == "search_friends"
    assert problem.signatures[0] == "apis.venmo.search_friends(access_token, query='', page_limit=5)"
    assert "the venmo app has no API 'search_friend'" in problem.message
    # an API named without calling it is checked too
    assert kinds("send = apis.venmo.send_money") == [("unknown_api", "apis.venmo.send_money")]


def test_an_unknown_keyword_names_the_closest_parameters_and_the_signature():
    [problem] = check_cell("apis.venmo.create_transaction(receiver_email=e, amount=1, access_token=t, descripton='x')",
                           DOCS)
    assert (problem.kind, problem.text, problem.alternatives[0]) == ("unknown_argument", "descripton", "description")
    assert problem.signatures == ("apis.venmo.create_transaction(receiver_email, amount, access_token, "
                                  "description='', private=False)",)
    # access_token is accepted everywhere: an API that needs no login ignores it
    assert check_cell("apis.spotify.search_songs(query='x', access_token=t)", DOCS) == []


def test_a_missing_required_argument_is_named_and_a_misspelt_one_is_both():
    assert kinds("apis.venmo.show_transactions()") == [("missing_argument", "access_token")]
    assert kinds("apis.venmo.search_friends(query='M', acces_token=t)") == [("unknown_argument", "acces_token"),
                                                                          ("missing_argument", "access_token")]
    # **kwargs may hold anything: no missing argument is claimed, but named keywords are still checked
    assert kinds("apis.venmo.login(**creds)") == []
    assert kinds("apis.venmo.login(user=1, **creds)") == [("unknown_argument", "user")]


def test_positional_arguments_count_in_order_but_are_named_as_keywords_to_use():
    problems = check_cell("apis.venmo.login('a@b.c')", DOCS)
    assert [(p.kind, p.text, p.alternatives) for p in problems] == [("bad_argument", "'a@b.c'", ("username",)),
                                                                   ("missing_argument", "password", ("password",))]
    assert "takes keyword arguments only; write username='a@b.c'" in problems[0].message


def test_a_syntax_error_says_where():
    [problem] = check_cell("x = 1\nprint(apis.venmo.show_transactions(access_token=t)\n", DOCS)
    assert problem.kind == "syntax_error" and problem.line == 2 and problem.col == 6
    assert "never closed" in problem.message and "line 2, column 6" in problem.message
    # what the parser accepts but AppWorld's shell refuses
    assert kinds("apis.venmo.login(username=1, username=2, password=3)")[0][0] == "syntax_error"


def test_each_problem_once_in_source_order_and_a_rebound_apis_is_not_checked():
    cell = "apis.venmo.show_transactions()\napis.venmo.show_transactions()\napis.nope.x()"
    assert kinds(cell) == [("missing_argument", "access_token"), ("unknown_api", "apis.nope")]
    assert check_cell("apis = make_client()\napis.anything.at_all()", DOCS) == []


def test_schema_problems_have_known_kinds():
    with pytest.raises(PayloadError, match="unknown schema problem kind 'typo'"):
        SchemaProblem("typo", "x", "y")


def test_signatures_show_defaults_and_describe_api_uses_them():
    assert signature("venmo", "login", DOCS["venmo"]["login"]) == "apis.venmo.login(username, password)"
    assert describe_api("supervisor", "complete_task", DOCS["supervisor"]["complete_task"]) == (
        "apis.supervisor.complete_task(answer=None): Done.")


def test_the_wrong_keyword_variant_renames_the_first_app_keyword():
    cell = ('friends = apis.venmo.search_friends(query="Mike", access_token=tok)\n'
            'apis.supervisor.complete_task(answer=None)')
    wrong = wrong_keyword(cell, DOCS)
    assert wrong == cell.replace("query=", "querys=", 1)
    assert kinds(wrong) == [("unknown_argument", "querys")]
    assert wrong_keyword("apis.venmo.show_transactions(access_token=t)", DOCS) == (
        "apis.venmo.show_transactions(token=t)")
    assert wrong_keyword("apis.supervisor.complete_task(answer=None)", DOCS) is None
    assert wrong_keyword("print('é'); apis.venmo.login(username=u, password=p)", DOCS) == (
        "print('é'); apis.venmo.login(usernames=u, password=p)")
