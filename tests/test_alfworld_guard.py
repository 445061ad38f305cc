"""DARC's ALFWorld guard without the engine: goal parsing, tracking, phases, scores, parameters."""

from __future__ import annotations

import subprocess
import sys

import pytest

from playground.envs.alfworld.goals import parse_goal
from playground.envs.alfworld.guard import NO_PRIORS, Guard, Priors, contents, parse_command, relevant_to
from playground.envs.alfworld.interventions import GuardConfigError, parse_params
from playground.envs.alfworld.priors import estimate

ROOM = ["go to cabinet 1", "go to countertop 1", "go to countertop 2", "go to fridge 1", "go to garbagecan 1",
        "go to microwave 1", "go to sinkbasin 1", "help", "inventory", "look"]


@pytest.mark.parametrize("sentence, expected", [
    ("put a apple in fridge.", ("pick_and_place_simple", "apple", "fridge")),
    ("put some egg on countertop.", ("pick_and_place_simple", "egg", "countertop")),
    ("look at cd under the desklamp.", ("look_at_obj_in_light", "cd", "desklamp")),
    ("examine the watch with the floorlamp.", ("look_at_obj_in_light", "watch", "floorlamp")),
    ("put a clean mug in cabinet.", ("pick_clean_then_place_in_recep", "mug", "cabinet")),
    ("clean some potato and put it in fridge.", ("pick_clean_then_place_in_recep", "potato", "fridge")),
    ("put a hot plate in cabinet.", ("pick_heat_then_place_in_recep", "plate", "cabinet")),
    ("heat some bread and put it in countertop.", ("pick_heat_then_place_in_recep", "bread", "countertop")),
    ("put a cool pot in cabinet.", ("pick_cool_then_place_in_recep", "pot", "cabinet")),
    ("cool some egg and put it in microwave.", ("pick_cool_then_place_in_recep", "egg", "microwave")),
    ("put two soapbar in sinkbasin.", ("pick_two_obj_and_place", "soapbar", "sinkbasin")),
    ("find two watch and put them in coffeetable.", ("pick_two_obj_and_place", "watch", "coffeetable")),
])
def test_every_alfworld_goal_template_parses(sentence, expected):
    goal = parse_goal(sentence)
    assert (goal.task_type, goal.target, goal.destination) == expected


def test_free_text_goals_fall_back_to_keywords_and_known_names():
    goal = parse_goal("Chill a tomato, then leave it on the counter top by the stove.", {"tomato", "stoveburner"})
    assert goal.task_type == "pick_cool_then_place_in_recep" and goal.target == "tomato"
    assert parse_goal("Hold the book near a lamp.", {"book", "desklamp"}).task_type == "look_at_obj_in_light"


def test_commands_and_observations_are_parsed():
    assert parse_command("take apple 1 from countertop 2") == parse_command("Take  apple 1 from countertop 2")
    c = parse_command("heat mug 2 with microwave 1")
    assert (c.verb, c.obj, c.recep) == ("heat", "mug 2", "microwave 1")
    assert parse_command("go to sinkbasin 1").recep == "sinkbasin 1"
    seen = contents("You arrive at countertop 1. On the countertop 1, you see a apple 1, a mug 2, and a pen 1.")
    assert seen == {"countertop 1": ["apple 1", "mug 2", "pen 1"]}
    assert contents("You open the fridge 1. The fridge 1 is open. In it, you see nothing.") == {"fridge 1": []}


def _history(*steps):
    return [(action, observation, True) for action, observation in steps]


def test_phases_follow_search_take_transform_place():
    guard = Guard()
    goal = "put a hot apple in fridge."
    assert guard.state(goal, ROOM, [])[2] == "search"
    at_counter = _history(("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a apple 1."))
    here = ROOM + ["take apple 1 from countertop 1", "examine countertop 1"]
    assert guard.state(goal, here, at_counter)[2] == "take"
    assert guard.top(goal, here, at_counter, k=1) == ["take apple 1 from countertop 1"]
    holding = at_counter + _history(("take apple 1 from countertop 1", "You pick up the apple 1 from the countertop 1."))
    assert guard.state(goal, ROOM, holding)[2] == "transform"
    assert guard.top(goal, ROOM, holding, k=1) == ["go to microwave 1"]
    at_microwave = holding + _history(("go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed."))
    options = ROOM + ["heat apple 1 with microwave 1", "cool apple 1 with microwave 1", "move apple 1 to microwave 1",
                      "open microwave 1"]
    assert guard.top(goal, options, at_microwave, k=1) == ["heat apple 1 with microwave 1"]
    heated = at_microwave + _history(("heat apple 1 with microwave 1", "You heat the apple 1 using the microwave 1."))
    assert guard.state(goal, ROOM, heated)[2] == "place"
    assert guard.top(goal, ROOM, heated, k=1) == ["go to fridge 1"]


def test_look_tasks_end_with_the_lamp():
    guard = Guard()
    goal = "look at cd under the desklamp."
    room = ["go to desk 1", "go to drawer 1", "go to shelf 1", "look"]
    history = _history(("go to drawer 1", "You arrive at drawer 1. The drawer 1 is open. In it, you see a cd 1."),
                       ("take cd 1 from drawer 1", "You pick up the cd 1 from the drawer 1."))
    assert guard.state(goal, room, history)[2] == "light"
    assert guard.top(goal, room, history, k=1) == ["go to desk 1"]
    at_desk = history + _history(("go to desk 1", "You arrive at desk 1. On the desk 1, you see a desklamp 1."))
    assert guard.top(goal, room + ["use desklamp 1", "move cd 1 to desk 1"], at_desk, k=1) == ["use desklamp 1"]


def test_conflicts_and_loops_are_penalised():
    guard = Guard()
    goal = "find two pen and put them in drawer."
    history = _history(("go to desk 1", "You arrive at desk 1. On the desk 1, you see a pen 1, a pen 2, and a book 1."),
                       ("take pen 1 from desk 1", "You pick up the pen 1 from the desk 1."),
                       ("go to drawer 1", "You arrive at drawer 1. The drawer 1 is open. In it, you see nothing."),
                       ("move pen 1 to drawer 1", "You move the pen 1 to the drawer 1."))
    options = ["go to desk 1", "go to shelf 1", "take pen 1 from drawer 1", "examine drawer 1", "look"]
    ranked = {s.action: s for s in guard.score(goal, options, history)}
    assert ranked["take pen 1 from drawer 1"].parts["conflict"] > 0  # taking back a placed object
    assert ranked["go to desk 1"].score > ranked["go to shelf 1"].score  # pen 2 was seen on the desk
    looping = _history(("look", "You are facing the desk 1."), ("look", "You are facing the desk 1."))
    scores = {s.action: s for s in guard.score("put a pen in drawer.", ["look", "go to desk 1"], looping,
                                               "You are facing the desk 1.")}
    assert scores["look"].parts["loop"] > 0 and scores["go to desk 1"].score > scores["look"].score


def test_priors_come_from_expert_plans_and_steer_the_search():
    steps = [["go to coffeemachine 1", "You arrive at coffeemachine 1. On the coffeemachine 1, you see a mug 1."],
             ["take mug 1 from coffeemachine 1", "You pick up the mug 1 from the coffeemachine 1."],
             ["go to cabinet 1", "You arrive at cabinet 1. The cabinet 1 is open. In it, you see nothing."],
             ["move mug 1 to cabinet 1", "You move the mug 1 to the cabinet 1."]]
    trajectories = [{"goal": "put a mug in cabinet.", "steps": steps}] * 3
    priors = estimate(trajectories)
    assert priors.found_in == {"mug": {"coffeemachine": 3}}
    assert priors.verbs["pick_and_place_simple"]["take"] == {"take": 3}
    room = ["go to cabinet 1", "go to coffeemachine 1", "go to countertop 1"]
    assert Guard(priors).top("put a clean mug in sinkbasin.", room, [], k=1) == ["go to coffeemachine 1"]
    assert Guard(NO_PRIORS).top("put a clean mug in sinkbasin.", room, [], k=1) == ["go to cabinet 1"]


def test_type_saturation_keeps_only_task_commands():
    goal = parse_goal("put a cool egg in microwave.")
    assert relevant_to(goal, "cool egg 1 with fridge 1") and relevant_to(goal, "take egg 2 from countertop 1")
    assert not relevant_to(goal, "heat egg 1 with microwave 1")
    assert not relevant_to(goal, "take mug 1 from countertop 1")
    assert not relevant_to(goal, "inventory") and not relevant_to(goal, "use desklamp 1")


def test_top_is_deterministic_and_keeps_twelve():
    many = [f"go to drawer {i}" for i in range(1, 20)] + ["look"]
    first = Guard().top("put a pen in shelf.", many, [])
    assert len(first) == 12 and first == Guard().top("put a pen in shelf.", list(reversed(many)), [])
    assert Priors().location("pen", "drawer") == 0.0


def test_guard_parameters_are_checked():
    assert parse_params({"top_actions": 5, "unrelated": 1})["top_actions"] == 5
    for bad in ({"top_actions": 0}, {"fallback": "maybe"}, {"prune_every_step": "yes"}, {"prior_games": -1}):
        with pytest.raises(GuardConfigError):
            parse_params(bad)


def test_importing_the_plugin_imports_neither_alfworld_nor_textworld():
    code = ("import sys, playground.envs.alfworld as p; p.register_envs(lambda provider: provider.task_sets());"
            "print(sorted(m for m in ('alfworld', 'textworld') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_wrong_object_in_hand_may_be_put_down():
    goal = parse_goal("put a cool egg in microwave.")
    assert relevant_to(goal, "move mug 1 to countertop 1", holding="mug 1")
    assert not relevant_to(goal, "move mug 1 to countertop 1")
