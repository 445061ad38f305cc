"""The WebShop env, text mode: search → results → item (→ sub-pages) → Buy Now.

Pages and actions follow the WebShop paper:
- search page: `search[query]` (any non-empty query: `admissible_actions` lists the
  template `search[...]`);
- results page: 10 products per page out of at most 50, `click[Next >]`,
  `click[< Prev]`, `click[Back to Search]`, `click[<ASIN>]`;
- item page: `click[<option value>]` selects it in its option group, `click[Description]`,
  `click[Features]`, `click[Reviews]`, `click[Attributes]` open sub-pages (from which
  `click[< Prev]` goes back), `click[< Prev]` returns to the results, `click[Buy Now]`
  buys the product with the chosen options and ends the episode.
Clicks match labels case-insensitively. An action that names nothing on the page
changes nothing (`valid_action` False).

`info` carries `goal`, `admissible_actions`, `valid_action`, `won` (reward 1), `lost`,
`score` (the reward once bought, else 0) and `max_score` 1, plus two keys detectors use:
`action_kinds` (admissible action -> "search", "page" (results paging), "open" (a
product), "select" (an option), "look" (a sub-page), "move" (back) or "finish" (Buy
Now)) and `open_choices` (option groups on the item page with no value chosen yet);
`action_format` is "web" (clicks and searches, no world objects). After Buy Now it has
`reward_info`; with `expert=True`, `expert_plan`.
The state is a small record, so the env can snapshot and restore. The page after Buy
Now ends with the purchase's score, "Your score (min 0.0, max 1.0): 0.75";
`remove_grade_text` removes it for judges and keeps the purchase's confirmation.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

from playground.core.env import EnvInfo, EnvProvider, TextEnv, cut_grade_text, grade_text_pattern
from playground.core.task_sets import TaskSet, seed_range
from playground.envs.webshop import data
from playground.envs.webshop.catalogue import Catalogue, Goal, Product
from playground.envs.webshop.reward import MATCH_THRESHOLD, match_score, normalize_color, noun_tagger, purchase_reward
from playground.envs.webshop.search import SEARCH_RETURN_N, index_for

PER_PAGE = 10
BACK, NEXT, PREV, BUY = "Back to Search", "Next >", "< Prev", "Buy Now"
SUB_PAGES = ("Description", "Features", "Reviews", "Attributes")
SEARCH_TEMPLATE = "search[...]"
ACTION_RE = re.compile(r"^\s*(search|click)\s*\[(.*)\]\s*$", re.I | re.S)
# the purchase's score, printed after Buy Now: "Your score (min 0.0, max 1.0): 0.75" (the page's grade text)
GRADE_TEXT = grade_text_pattern(r"Your score \(min [^()\n]*\):[ \t]*[-+]?\d+(?:\.\d+)?\.?")


def without_grade_text(text: str) -> str:
    """A WebShop page without the purchase's score sentence; the confirmation of the purchase stays (it is what
    the agent's own Buy Now did, whatever it scored): `WebShopEnv.remove_grade_text`, `WebShopProvider`'s too."""
    return cut_grade_text(text, GRADE_TEXT)


class WebShopInfo(EnvInfo, total=False):
    """`EnvInfo` plus, once bought, how the purchase was scored (`reward_info`)."""

    reward_info: dict[str, Any]


@dataclass(frozen=True)
class PageState:
    """Where the shopper is: the page, the last search, the product and chosen options."""

    page: str = "search"  # search | results | item | sub
    query: str = ""
    results: tuple[str, ...] = ()
    page_no: int = 1
    asin: str = ""
    chosen: tuple[tuple[str, str], ...] = ()  # (option name, value), in page order
    sub_page: str = ""
    bought: bool = False
    reward: float = 0.0


class WebShopEnv(TextEnv):
    """A WebShop session over one goal (see module docstring)."""

    can_snapshot = True
    env_name = "webshop"

    def __init__(self, catalogue: Catalogue, goal_of: Callable[[str], Goal], expert: bool = False,
                 task_set: TaskSet | None = None) -> None:
        super().__init__(task_set)
        self.catalogue, self.goal_of, self.expert = catalogue, goal_of, expert
        self.index = index_for(catalogue)
        self.state = PageState()
        self.goal: Goal | None = None
        self._expert_search: list[str] | None = None
        self.reward_info: dict | None = None

    # -- gymnasium API -----------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Start on the search page of task `options["task"]` (default: one of the default split's, by seed)."""
        super().reset(seed=seed)
        self.goal = self.goal_of(self.task_for_reset(seed, options))
        self.state, self.reward_info = PageState(), None
        self._expert_search = None  # the expert's search steps depend on the goal only
        return self.render(), self._info(valid=True)

    def step(self, action: str):
        """Apply one `search[...]` or `click[...]` action."""
        if self.goal is None:
            raise RuntimeError("webshop: call reset() first")
        if self.state.bought:
            raise RuntimeError("webshop: the episode is over (bought); call reset()")
        new_state = self._transition(str(action))
        valid = new_state is not None
        if new_state is not None:
            self.state = new_state
        reward = self.state.reward if self.state.bought else 0.0
        return self.render(), reward, self.state.bought, False, self._info(valid=valid)

    def snapshot(self) -> PageState:
        """The current page state (immutable)."""
        return self.state

    def restore(self, snapshot: PageState) -> None:
        """Go back to a state from `snapshot()`."""
        self.state = snapshot

    # -- transitions -------------------------------------------------------------------

    def _transition(self, action: str) -> PageState | None:
        match = ACTION_RE.match(action)
        if not match:
            return None
        verb, arg = match.group(1).lower(), " ".join(match.group(2).split())
        s = self.state
        if verb == "search":
            if s.page != "search" or not arg:
                return None
            return PageState(page="results", query=arg, results=tuple(self.index.search(arg, SEARCH_RETURN_N)))
        label = arg.lower()
        if label == BACK.lower() and s.page != "search":
            return PageState()
        if s.page == "results":
            return self._click_results(label)
        if s.page == "item":
            return self._click_item(label)
        if s.page == "sub" and label == PREV.lower():
            return replace(s, page="item", sub_page="")
        return None

    def _click_results(self, label: str) -> PageState | None:
        s = self.state
        if label == NEXT.lower() and s.page_no < self._page_count():
            return replace(s, page_no=s.page_no + 1)
        if label == PREV.lower() and s.page_no > 1:
            return replace(s, page_no=s.page_no - 1)
        shown = {a.lower(): a for a in self._shown()}
        if label in shown:
            return replace(s, page="item", asin=shown[label], chosen=())
        return None

    def _click_item(self, label: str) -> PageState | None:
        s = self.state
        product = self.catalogue.product(s.asin)
        if label == PREV.lower():
            return replace(s, page="results", asin="", chosen=())
        if label in {p.lower() for p in SUB_PAGES}:
            return replace(s, page="sub", sub_page=next(p for p in SUB_PAGES if p.lower() == label))
        if label == BUY.lower():
            assert self.goal is not None  # reset() has set it
            chosen = dict(s.chosen)
            result = purchase_reward(product, self.goal, chosen)
            self.reward_info = {**asdict(result), "asin": product.asin, "options": chosen}
            return replace(s, bought=True, reward=result.reward)
        for name, values in product.options.items():
            value = next((v for v in values if v.lower() == label), None)
            if value is not None:
                chosen = dict(s.chosen)
                chosen[name] = value
                return replace(s, chosen=tuple((n, chosen[n]) for n in product.options if n in chosen))
        return None

    # -- pages -------------------------------------------------------------------------

    def _page_count(self) -> int:
        return max(1, -(-len(self.state.results) // PER_PAGE))

    def _shown(self) -> tuple[str, ...]:
        s = self.state
        return s.results[(s.page_no - 1) * PER_PAGE: s.page_no * PER_PAGE]

    def render(self) -> str:
        """The current page as text; clickable labels are in [brackets]."""
        s, goal = self.state, self.goal
        assert goal is not None, "webshop: call reset() first"
        head = f"Instruction: {goal.instruction}"
        if s.bought:
            info = self.reward_info
            assert info is not None  # set with bought
            return (f"Thank you for shopping with us! You bought {info['asin']} with options "
                    f"{info['options'] or 'none'}. Your score (min 0.0, max 1.0): {s.reward:.2f}")
        if s.page == "search":
            return f"WebShop\n{head}\n[Search]"
        if s.page == "results":
            lines = [head, f"[{BACK}]", f"Page {s.page_no} (Total results: {len(s.results)})"]
            lines += [f"[{PREV}]"] if s.page_no > 1 else []
            lines += [f"[{NEXT}]"] if s.page_no < self._page_count() else []
            for asin in self._shown():
                product = self.catalogue.product(asin)
                lines += [f"[{asin}]", product.title, product.price_text]
            if not s.results:
                lines.append("No products match your search.")
            return "\n".join(lines)
        product = self.catalogue.product(s.asin)
        if s.page == "sub":
            return "\n".join([head, f"[{BACK}]", f"[{PREV}]", f"{s.sub_page}:", _sub_page_text(product, s.sub_page)])
        chosen = dict(s.chosen)
        lines = [head, f"[{BACK}]", f"[{PREV}]"]
        for name, values in product.options.items():
            picked = f" (selected: {chosen[name]})" if name in chosen else ""
            lines.append(f"{name}: " + " ".join(f"[{v}]" for v in values) + picked)
        lines += [product.title, f"Price: {product.price_text}", f"Rating: {product.rating}",
                  " ".join(f"[{p}]" for p in SUB_PAGES), f"[{BUY}]"]
        return "\n".join(lines)

    def remove_grade_text(self, text: str) -> str:
        """The page without the purchase's score sentence ("Your score (min 0.0, max 1.0): 0.75")."""
        return without_grade_text(text)

    # -- info --------------------------------------------------------------------------

    def action_kinds(self) -> dict[str, str]:
        """Each admissible action's kind: "search", "page", "open", "select", "look", "move" or "finish"."""
        s = self.state
        if s.bought:
            return {}
        if s.page == "search":
            return {SEARCH_TEMPLATE: "search"}
        kinds = {f"click[{BACK}]": "move"}
        if s.page == "results":
            if s.page_no > 1:
                kinds[f"click[{PREV}]"] = "page"
            if s.page_no < self._page_count():
                kinds[f"click[{NEXT}]"] = "page"
            kinds.update({f"click[{a}]": "open" for a in self._shown()})
        elif s.page == "item":
            product = self.catalogue.product(s.asin)
            kinds[f"click[{PREV}]"] = "move"
            kinds.update({f"click[{v}]": "select" for values in product.options.values() for v in values})
            kinds.update({f"click[{p}]": "look" for p in SUB_PAGES})
            kinds[f"click[{BUY}]"] = "finish"
        else:
            kinds[f"click[{PREV}]"] = "move"
        return kinds

    def open_choices(self) -> list[str]:
        """Option groups of the product on screen that have no value chosen yet."""
        if self.state.page != "item" or self.state.bought:
            return []
        chosen = dict(self.state.chosen)
        return [n for n in self.catalogue.product(self.state.asin).options if n not in chosen]

    def _info(self, valid: bool) -> WebShopInfo:
        s = self.state
        kinds = self.action_kinds()
        assert self.goal is not None  # reset() has set it
        info: WebShopInfo = {"goal": self.goal.instruction, "admissible_actions": sorted(kinds), "valid_action": valid,
                "won": s.bought and s.reward >= 1.0, "lost": s.bought and s.reward < 1.0,
                "score": s.reward if s.bought else 0.0, "max_score": 1.0, "action_kinds": kinds,
                "open_choices": self.open_choices(), "action_format": "web"}
        if self.reward_info is not None:
            info["reward_info"] = dict(self.reward_info)
        if self.expert:
            info["expert_plan"] = self.expert_plan()
        return info

    # -- the expert --------------------------------------------------------------------

    def expert_plan(self) -> list[str]:
        """The remaining actions that buy the goal's product with the goal's options."""
        s, goal = self.state, self.goal
        assert goal is not None, "webshop: call reset() first"
        if s.bought:
            return []
        target = self.catalogue.product(goal.asin)
        picks = [f"click[{v}]" for v in _goal_option_values(target, goal)]
        buy = [*picks, f"click[{BUY}]"]
        if s.page == "item" and s.asin == goal.asin:
            chosen = set(dict(s.chosen).values())
            return [p for p in picks if p[6:-1] not in chosen] + [f"click[{BUY}]"]
        if s.page == "sub" and s.asin == goal.asin:
            return [f"click[{PREV}]", *buy]
        if s.page == "results" and goal.asin in s.results:
            where = s.results.index(goal.asin) // PER_PAGE + 1
            if where == s.page_no:
                return [f"click[{goal.asin}]", *buy]
            step = f"click[{NEXT}]" if where > s.page_no else f"click[{PREV}]"
            return [step] * abs(where - s.page_no) + [f"click[{goal.asin}]", *buy]
        if s.page != "search":
            return [f"click[{BACK}]", *self._search_plan(target, goal), *buy]
        return [*self._search_plan(target, goal), *buy]

    def _search_plan(self, target: Product, goal: Goal) -> list[str]:
        """Search with the goal's words; if that misses the product, with its title (worked out once per goal)."""
        if self._expert_search is None:
            self._expert_search = self._plan_search(target, goal)
        return self._expert_search

    def _plan_search(self, target: Product, goal: Goal) -> list[str]:
        query = expert_query(goal)
        results = self.index.search(query, SEARCH_RETURN_N)
        if goal.asin not in results:
            query = target.title
            results = self.index.search(query, SEARCH_RETURN_N)
        pages = results.index(goal.asin) // PER_PAGE if goal.asin in results else 0
        return [f"search[{query}]", *[f"click[{NEXT}]"] * pages, f"click[{goal.asin}]"]


def expert_query(goal: Goal) -> str:
    """The goal instruction without its price clause: what the expert types into search."""
    return re.split(r",? and price lower than", goal.instruction)[0]


def _goal_option_values(product: Product, goal: Goal) -> list[str]:
    """For each goal option, the product's option value that matches it best (one per group)."""
    picks: dict[str, str] = {}
    for wanted in goal.options:
        wanted = normalize_color(wanted)
        best = max(((match_score(normalize_color(v), wanted), name, v) for name, values in product.options.items()
                    if name not in picks for v in values), default=None)
        if best is not None and best[0] > MATCH_THRESHOLD:
            picks[best[1]] = best[2]
    return list(picks.values())


def _sub_page_text(product: Product, page: str) -> str:
    if page == "Description":
        return product.description
    if page == "Features":
        return "\n".join(product.bullets)
    if page == "Reviews":
        return "\n".join(f"{stars} stars: {text}" for stars, text in product.reviews) or "No reviews yet."
    return "\n".join(product.attributes)


class WebShopProvider(EnvProvider):
    """Provides the `webshop` env: the embedded catalogue, and the real files via WEBSHOP_DATA."""

    name = "webshop"
    description = "WebShop (text mode): search, results, item pages, Buy Now; reward as in the paper"
    default_task_set = "generated"

    def task_sets(self) -> dict[str, TaskSet]:
        """`generated` always; `data` when WEBSHOP_DATA is set (its goals are counted when first used)."""
        sets = {"generated": TaskSet(
            "generated", "embedded catalogue of 1,000 generated products; goals generated by seed",
            {"train": seed_range("generated", 0), "dev": seed_range("generated", 10_000),
             "test": seed_range("generated", 20_000)}, default_count=10)}
        directory = data.data_dir()
        if directory is not None:
            sets["data"] = TaskSet("data", f"real WebShop files in {directory}",
                                   {split: _data_split(split) for split in data.SPLITS}, default_count=10,
                                   is_task=_is_data_task, task_form="'data-<n>', n a goal index of the WebShop files")
        return sets

    def make(self, task_set: str, *, expert: bool = False, **options: Any) -> WebShopEnv:
        """Build an env over `task_set`'s catalogue."""
        chosen = self.task_sets().get(task_set)
        if task_set == "generated":
            catalogue = data.generated_catalogue()
            return WebShopEnv(catalogue, lambda task: data.generated_goal(catalogue, _task_number(task, "generated")),
                              expert, chosen)
        if task_set == "data":
            catalogue = _real_catalogue()
            return WebShopEnv(catalogue, lambda task: catalogue.goals[_task_number(task, "data")], expert, chosen)
        raise KeyError(task_set)

    def remove_grade_text(self, text: str) -> str:
        """A WebShop page without the purchase's score sentence (the env's own function)."""
        return without_grade_text(text)

    def describe(self, task_set: str) -> dict:
        """The data behind the task set, for trace headers."""
        if task_set == "data":
            catalogue = _real_catalogue()
            return {"env": self.name, "task_set": task_set, "data": str(data.data_dir()),
                    "products": len(catalogue.products), "goals": len(catalogue.goals), "noun_tagger": noun_tagger()}
        return {"env": self.name, "task_set": task_set, "catalogue": "generated", "products": 1000, "seed": 0,
                "noun_tagger": noun_tagger()}


def _real_catalogue() -> Catalogue:
    directory = data.data_dir()
    if directory is None:
        raise data.WebShopDataError(f"webshop:data needs {data.DATA_ENV} set to the directory of WebShop's data files")
    return data.load_real(str(directory))


def _data_split(split: str):
    def ids(count: int) -> list[str]:
        indices = data.split_range(split, len(_real_catalogue().goals))
        return [f"data-{i}" for i in indices[:count]]

    return ids


def _is_data_task(task_id: str) -> bool:
    head, _, number = task_id.rpartition("-")
    return head == "data" and number.isascii() and number.isdigit() and int(number) < len(_real_catalogue().goals)


def _task_number(task_id: str, prefix: str) -> int:
    head, _, number = task_id.rpartition("-")
    if head != prefix or not number.isdigit():
        raise ValueError(f"webshop: task {task_id!r} is not a {prefix!r} task (expected {prefix}-<number>)")
    return int(number)
