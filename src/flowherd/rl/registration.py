"""flowherd's Gymnasium environments, registered by id.

``register_envs`` is what importing `flowherd.rl` runs, and the target of the package's entry point
in Gymnasium's plugin group ``gymnasium.envs`` (pyproject.toml): Gymnasium 0.26 to 0.29 calls every
function of that group when it is imported, so that ``gymnasium.make("flowherd/Buffering-v0")``
works without importing flowherd first. Gymnasium 1.0 dropped that plugin loading; there the id
with its module, ``gymnasium.make("flowherd.rl:flowherd/Buffering-v0")``, imports the registering
module itself (Gymnasium's ``module:id`` form), and so does any import of `flowherd.rl`.
"""

from __future__ import annotations

#: The buffering environment (`flowherd.rl.env.BufferingEnv`).
ENV_ID = "flowherd/Buffering-v0"
ENTRY_POINT = "flowherd.rl.env:BufferingEnv"
#: The id with its registering module: `gymnasium.make` imports the module first (any Gymnasium).
ENV_ID_WITH_MODULE = f"flowherd.rl:{ENV_ID}"
#: The paths-and-delays environment (`flowherd.rl.paths_env.PathsEnv`).
PATHS_ENV_ID = "flowherd/PathsDelays-v0"
PATHS_ENTRY_POINT = "flowherd.rl.paths_env:PathsEnv"


def register_envs() -> None:
    """Register flowherd's environments with Gymnasium (once; later calls do nothing)."""
    # the registration module itself, not `gymnasium`: the plugin loader of Gymnasium 0.2x calls
    # this while `gymnasium/__init__.py` is still being imported
    from gymnasium.envs.registration import register, registry

    if ENV_ID not in registry:
        register(id=ENV_ID, entry_point=ENTRY_POINT)
    if PATHS_ENV_ID not in registry:
        register(id=PATHS_ENV_ID, entry_point=PATHS_ENTRY_POINT)
