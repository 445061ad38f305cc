"""Sample ALFWorld-compatible problems by seed, on alfworld's own domain and object tables.

A problem is one room (kitchen, living room, bedroom or bathroom, as ALFRED allows for
the task type) with receptacles and objects placed by seed, and one goal of the six
task types, written as a PDDL problem for alfworld's `alfred.pddl` domain. What fits in
what (`canContain`), which objects can be cleaned, heated, cooled or toggled, which
receptacles open, and the goal formulas all come from the alfworld package
(`alfworld.gen.constants`, `alfworld.gen.goal_library`), so the games behave like the
official ones.

Splits: seeds train 0-9999, valid_seen 10000-19999, valid_unseen 20000-29999; the n-th
seed of a split has task type `TASK_TYPES[n % 6]`, so any six consecutive seeds cover
the six types. Every (task type, object,
destination) combination is assigned by a fixed hash to either the seen or the unseen
half; `train` and `valid_seen` draw only seen combinations, `valid_unseen` only unseen
ones, so no valid_unseen combination occurs in train.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from functools import lru_cache
from types import SimpleNamespace

from playground.envs.alfworld.data import TASK_TYPES, TaskFolder
from playground.envs.alfworld.engine import alfworld_module

GENERATOR_VERSION = "1"
SEED_STARTS = {"train": 0, "valid_seen": 10_000, "valid_unseen": 20_000}
SPLIT_SIZE = 10_000
UNSEEN_SHARE = 4  # one combination in UNSEEN_SHARE is held out for valid_unseen

# Receptacle types per room, with (min, max) instances; objects that may be found there.
ROOMS: dict[str, dict] = {
    "Kitchen": {
        "scene_base": 0,
        "receptacles": {"CounterTop": (1, 3), "Cabinet": (2, 6), "Drawer": (1, 4), "Fridge": (1, 1),
                        "Microwave": (1, 1), "SinkBasin": (1, 1), "StoveBurner": (2, 4), "DiningTable": (0, 1),
                        "GarbageCan": (1, 1), "CoffeeMachine": (1, 1), "Toaster": (0, 1), "Shelf": (0, 2)},
        "objects": ("Apple", "Bread", "Egg", "Lettuce", "Potato", "Tomato", "Mug", "Cup", "Bowl", "Plate", "Pan",
                    "Pot", "Kettle", "Knife", "ButterKnife", "Fork", "Spoon", "Spatula", "Ladle", "DishSponge",
                    "SoapBottle", "SaltShaker", "PepperShaker", "WineBottle", "Glassbottle", "CreditCard"),
    },
    "LivingRoom": {
        "scene_base": 200,
        "receptacles": {"Sofa": (1, 1), "ArmChair": (0, 2), "CoffeeTable": (1, 1), "SideTable": (1, 2),
                        "TVStand": (0, 1), "Shelf": (0, 3), "Drawer": (0, 3), "Cabinet": (0, 3), "Dresser": (0, 1),
                        "GarbageCan": (1, 1), "Ottoman": (0, 1), "DiningTable": (0, 1)},
        "objects": ("RemoteControl", "KeyChain", "CreditCard", "Newspaper", "Laptop", "Pillow", "Box", "Statue",
                    "Vase", "WateringCan", "Watch", "Book", "CellPhone", "TissueBox", "Plate", "Bowl", "Candle"),
    },
    "Bedroom": {
        "scene_base": 300,
        "receptacles": {"Bed": (1, 1), "Desk": (0, 1), "SideTable": (0, 2), "Dresser": (0, 1), "Drawer": (2, 5),
                        "Shelf": (0, 3), "GarbageCan": (1, 1), "LaundryHamper": (0, 1), "Safe": (0, 1),
                        "ArmChair": (0, 1)},
        "objects": ("Book", "CD", "CellPhone", "Pencil", "Pen", "AlarmClock", "KeyChain", "CreditCard", "Laptop",
                    "Pillow", "Mug", "Bowl", "BaseballBat", "BasketBall", "TennisRacket", "Watch", "Cloth", "Box",
                    "Vase", "Statue", "TissueBox"),
    },
    "Bathroom": {
        "scene_base": 400,
        "receptacles": {"Toilet": (1, 1), "SinkBasin": (1, 2), "BathtubBasin": (0, 1), "CounterTop": (1, 1),
                        "Cabinet": (2, 4), "Drawer": (0, 3), "TowelHolder": (0, 1), "HandTowelHolder": (0, 1),
                        "ToiletPaperHanger": (1, 1), "GarbageCan": (1, 1), "Shelf": (0, 2), "Cart": (0, 1)},
        "objects": ("SoapBar", "SoapBottle", "Cloth", "Towel", "HandTowel", "ToiletPaper", "SprayBottle", "Candle",
                    "DishSponge", "Plunger", "TissueBox", "Kettle"),
    },
}
LAMPS = ("DeskLamp", "FloorLamp")
LAMP_HOLDERS = ("Desk", "Dresser", "SideTable")
# task type -> (appliance receptacle type, alfworld action-object class)
TRANSFORMS = {
    "pick_clean_then_place_in_recep": ("SinkBasin", "Cleanable"),
    "pick_heat_then_place_in_recep": ("Microwave", "Heatable"),
    "pick_cool_then_place_in_recep": ("Fridge", "Coolable"),
}
# named in alfred.pddl
DOMAIN_TYPES = {"rtype": ("SinkBasin", "Microwave", "Fridge"), "otype": ("Knife", "ButterKnife")}
DISTRACTORS = (6, 14)


@lru_cache(maxsize=1)
def tables() -> SimpleNamespace:
    """alfworld's object tables and goal library (imported on first use)."""
    constants = alfworld_module("gen.constants")
    goals = alfworld_module("gen.goal_library")
    return SimpleNamespace(fits=constants.VAL_RECEPTACLE_OBJECTS, actions=constants.VAL_ACTION_OBJECTS,
                           openable=set(constants.OPENABLE_CLASS_LIST), movable=set(constants.MOVABLE_RECEPTACLES),
                           rooms_for=constants.GOALS_VALID, goals=goals.gdict)


def is_unseen(task_type: str, obj: str, parent: str) -> bool:
    """True when the (task type, object, destination) combination belongs to valid_unseen."""
    digest = hashlib.sha256(f"{task_type}|{obj}|{parent}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % UNSEEN_SHARE == 0


@dataclass(frozen=True)
class Thing:
    """A receptacle or object instance: its PDDL id, type, location, and (objects) receptacle."""

    id: str
    type: str
    location: str
    receptacle: str = ""


@dataclass(frozen=True)
class Problem:
    """One sampled game: the goal's parameters and the room's contents."""

    seed: int
    split: str
    task_type: str
    room: str
    scene: int
    object_target: str
    parent_target: str  # destination receptacle type ("" for look_at_obj_in_light)
    toggle_target: str  # lamp type for look_at_obj_in_light, else ""
    start: str
    receptacles: tuple[Thing, ...]
    objects: tuple[Thing, ...]
    properties: tuple[tuple[str, str], ...] = field(default=())  # (predicate, object id)

    @property
    def folder(self) -> TaskFolder:
        """The task folder this problem is stored under."""
        return TaskFolder(self.task_type, self.object_target, "", self.parent_target or self.toggle_target,
                          str(self.scene))

    @property
    def trial(self) -> str:
        """The trial folder name."""
        return f"trial_{self.seed:05d}"

    @property
    def task_id(self) -> str:
        """`<split>/<task folder>/<trial>`."""
        return f"{self.split}/{self.folder.name}/{self.trial}"

    def pddl_params(self) -> dict:
        """The `pddl_params` of traj_data.json."""
        return {"object_target": self.object_target, "parent_target": self.parent_target,
                "toggle_target": self.toggle_target, "mrecep_target": "", "object_sliced": False}

    def pddl(self) -> str:
        """The PDDL problem text for alfworld's `alfred` domain."""
        t = tables()
        otypes = sorted({o.type for o in self.objects} | {self.object_target} | set(DOMAIN_TYPES["otype"]))
        rtypes = sorted({r.type for r in self.receptacles} | set(DOMAIN_TYPES["rtype"]))
        locations = sorted({self.start} | {r.location for r in self.receptacles})
        declared = (["agent1 - agent"] + [f"{o}Type - otype" for o in otypes] + [f"{r}Type - rtype" for r in rtypes]
                    + [f"{o.id} - object" for o in self.objects] + [f"{r.id} - receptacle" for r in self.receptacles]
                    + [f"{loc} - location" for loc in locations])
        facts = [f"(atLocation agent1 {self.start})"]
        for r in self.receptacles:
            facts += [f"(receptacleType {r.id} {r.type}Type)", f"(receptacleAtLocation {r.id} {r.location})"]
            if r.type in t.openable:
                facts.append(f"(openable {r.id})")
        for o in self.objects:
            facts += [f"(objectType {o.id} {o.type}Type)", f"(inReceptacle {o.id} {o.receptacle})",
                      f"(objectAtLocation {o.id} {o.location})"]
        facts += [f"({predicate} {thing})" for predicate, thing in self.properties]
        present = {o.type for o in self.objects}
        facts += [f"(canContain {r}Type {o}Type)" for r in rtypes for o in sorted(present) if o in t.fits.get(r, ())]
        goal = t.goals[self.task_type]["pddl"].format(obj=self.object_target, recep=self.parent_target,
                                                       toggle=self.toggle_target).replace("#", "-")
        lines = [f"(define (problem playground_{self.split}_{self.seed})", "(:domain alfred)", "(:objects",
                 *(f"    {d}" for d in declared), ")", "(:init", *(f"    {f}" for f in facts), ")"]
        return "\n".join(lines) + "\n" + goal.strip() + "\n"

    def traj_data(self, task_desc: str) -> dict:
        """The traj_data.json content (the fields alfworld reads, plus a `playground` record)."""
        return {
            "task_id": self.trial,
            "task_type": self.task_type,
            "pddl_params": self.pddl_params(),
            "scene": {"scene_num": self.scene, "floor_plan": f"FloorPlan{self.scene}", "random_seed": self.seed},
            "turk_annotations": {"anns": [{"task_desc": task_desc, "high_descs": [], "assignment_id": "generated"}]},
            "playground": {"generator_version": GENERATOR_VERSION, "split": self.split, "seed": self.seed,
                           "room": self.room},
        }


def _mangle(text: str) -> str:
    """ALFRED's id mangling: `Apple|+01.20|...` -> `Apple_bar__plus_01_dot_20_bar_...`."""
    for raw, safe in (("|", "_bar_"), ("-", "_minus_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        text = text.replace(raw, safe)
    return text


def _coordinate(rng: random.Random) -> str:
    value = rng.randint(-250, 250) / 100
    return "00.00" if value == 0 else f"{value:+06.2f}"


class _Ids:
    """Hands out unique ALFRED-style ids for things and locations."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def thing(self, type_name: str) -> str:
        """A new id for a receptacle or object of `type_name`."""
        # ALFRED names basins after their fixture: `Sink|x|y|z|SinkBasin` reads "sinkbasin 1"
        fixture, suffix = (type_name[: -len("Basin")], [type_name]) if type_name.endswith("Basin") else (type_name, [])
        while True:
            name = _mangle("|".join([fixture] + [_coordinate(self.rng) for _ in range(3)] + suffix))
            if name not in self.used:
                self.used.add(name)
                return name

    def location(self) -> str:
        """A new location id."""
        while True:
            x, z = self.rng.randint(-9, 9), self.rng.randint(-9, 9)
            name = _mangle(f"loc|{x}|{z}|{self.rng.randint(0, 3)}|{self.rng.choice((-30, 0, 15, 30, 45, 60))}")
            if name not in self.used:
                self.used.add(name)
                return name


def _combinations(task_type: str, pool: list[str], present: list[str]) -> list[tuple[str, str]]:
    """Every (object, destination-or-lamp) pair the room allows for the task type."""
    t = tables()
    sources = {o: [r for r in present if o in t.fits.get(r, ())] for o in pool}
    if task_type == "look_at_obj_in_light":
        if not any(h in present for h in LAMP_HOLDERS):
            return []
        return [(o, lamp) for o in pool if sources[o] for lamp in LAMPS]
    appliance, action_class = TRANSFORMS.get(task_type, ("", ""))
    if appliance and appliance not in present:
        return []
    pairs = []
    for o in pool:
        if action_class and o not in t.actions[action_class]:
            continue
        for parent in present:
            other_sources = [r for r in sources[o] if r != parent]
            if parent != appliance and o in t.fits.get(parent, ()) and other_sources:
                pairs.append((o, parent))
    return pairs


def sample_problem(seed: int, split: str) -> Problem:
    """Return the problem of `seed` in `split` (deterministic; see module docstring for splits)."""
    t = tables()
    task_type = TASK_TYPES[(seed - SEED_STARTS.get(split, 0)) % len(TASK_TYPES)]
    rng = random.Random(f"playground-alfworld:{GENERATOR_VERSION}:{split}:{seed}")
    for _ in range(100):
        room = rng.choice(sorted(t.rooms_for[task_type]))
        spec = ROOMS[room]
        counts = {r: rng.randint(lo, hi) for r, (lo, hi) in sorted(spec["receptacles"].items())}
        present = [r for r, n in counts.items() if n > 0]
        pool = [o for o in spec["objects"] if any(o in t.fits.get(r, ()) for r in present)]
        pairs = [p for p in _combinations(task_type, pool, present)
                 if is_unseen(task_type, *p) == (split == "valid_unseen")]
        if pairs:
            break
    else:
        raise RuntimeError(f"alfworld generator: no room fits {task_type} for seed {seed} ({split})")
    target, second = rng.choice(sorted(pairs))
    ids = _Ids(rng)
    start = ids.location()
    receptacles: list[Thing] = []
    for rtype, n in counts.items():
        for _ in range(n):
            shares = receptacles and receptacles[-1].type == rtype and rtype in ("Drawer", "Cabinet", "Shelf")
            location = receptacles[-1].location if shares and rng.random() < 0.3 else ids.location()
            receptacles.append(Thing(ids.thing(rtype), rtype, location))
    scene = spec["scene_base"] + rng.randint(1, 30)
    parent, toggle = ("", second) if task_type == "look_at_obj_in_light" else (second, "")
    objects, properties = _place_objects(rng, ids, task_type, target, parent, toggle, pool, receptacles)
    return Problem(seed, split, task_type, room, scene, target, parent, toggle, start, tuple(receptacles),
                   tuple(objects), tuple(properties))


def _place_objects(rng: random.Random, ids: _Ids, task_type: str, target: str, parent: str, toggle: str,
                   pool: list[str], receptacles: list[Thing]) -> tuple[list[Thing], list[tuple[str, str]]]:
    """Place the target instances, the lamp (look tasks) and distractors; return objects and their properties."""
    t = tables()

    def holders(obj_type: str, avoid: str = "") -> list[Thing]:
        """Receptacles that can hold `obj_type`, except those of type `avoid`."""
        return [r for r in receptacles if obj_type in t.fits.get(r.type, ()) and r.type != avoid]

    objects: list[Thing] = []

    def put(obj_type: str, places: list[Thing]) -> None:
        """Place a new `obj_type` in one of `places`."""
        where = rng.choice(places)
        objects.append(Thing(ids.thing(obj_type), obj_type, where.location, where.id))

    copies = rng.randint(2, 3) if task_type == "pick_two_obj_and_place" else rng.randint(1, 2)
    for _ in range(copies):
        put(target, holders(target, avoid=parent))
    if toggle:
        put(toggle, [r for r in receptacles if r.type in LAMP_HOLDERS])
    others = [o for o in pool if o != target]
    for obj_type in rng.sample(others, k=min(len(others), rng.randint(*DISTRACTORS))):
        put(obj_type, holders(obj_type))
    properties = []
    for o in objects:
        if o.type in LAMPS:
            properties.append(("toggleable", o.id))
            continue
        properties.append(("pickupable", o.id))
        if o.type in t.movable:
            properties.append(("isReceptacleObject", o.id))
        for predicate, action_class in (("cleanable", "Cleanable"), ("heatable", "Heatable"), ("coolable", "Coolable"),
                                        ("sliceable", "Sliceable")):
            if o.type in t.actions[action_class]:
                properties.append((predicate, o.id))
    return objects, properties
