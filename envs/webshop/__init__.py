"""`webshop`: WebShop (text mode) as a playground env plugin.

Task sets: `generated` (an embedded catalogue of 1,000 generated products, goals by
seed) and, when `WEBSHOP_DATA` names a directory of WebShop's data files, `data`.
Nothing heavy is imported here; the BM25 index is built when an env is first made.
"""

from playground.core.hookspecs import hookimpl


@hookimpl
def register_envs(register) -> None:
    """Register the `webshop` env."""
    from playground.envs.webshop.env import WebShopProvider

    register(WebShopProvider())
