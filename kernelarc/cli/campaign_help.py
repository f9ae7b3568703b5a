"""The lists in `kernelarc campaign --help`, generated from the code so they cannot go stale.

Place in the flow: `cli/campaign.py` takes its conf/ folder from here (`config_path`: the
checkout's, else the installed package's) and registers these OmegaConf resolvers before Hydra
composes; `conf/hydra/help/kernelarc.yaml` uses them (`${kernelarc_builtins:}`,
`${kernelarc_launchers:}`) where the help names the built-in problems and the multirun
launchers, and `launcher_check` refuses a launcher whose plugin is not installed with the install
command instead of Hydra's "Could not load" (the launchers are an optional extra).
"""

import importlib.util
from pathlib import Path

from omegaconf import OmegaConf

from kernelarc.errors import ConfigError
from kernelarc.problems.builtin_set import builtin_names

LAUNCHER_PLUGINS = {
    "local_joblib": "hydra_plugins.hydra_joblib_launcher",
    "slurm": "hydra_plugins.hydra_submitit_launcher",
}
"""Our launcher configs and the Hydra plugin each needs (`pip install 'kernelarc[launchers]'`)."""


def register_help_resolvers() -> None:
    """Register the resolvers the help template uses (idempotent)."""
    OmegaConf.register_new_resolver("kernelarc_builtins", _builtins, replace=True)
    OmegaConf.register_new_resolver("kernelarc_launchers", _launchers, replace=True)


def config_path() -> str:
    """The conf/ beside this kernelarc package (a checkout), else `pkg://kernelarc.conf`.

    The checkout's conf/ comes first so that code and configs always come from the same tree:
    an editable install of another checkout maps `kernelarc.conf` to that checkout's conf/.
    """
    checkout = Path(__file__).resolve().parents[2] / "conf"
    if (checkout / "campaign.yaml").is_file():
        return str(checkout)
    if importlib.util.find_spec("kernelarc.conf") is not None:
        return "pkg://kernelarc.conf"
    return str(checkout)


def config_dir() -> Path:
    """The conf/ folder on disk (for `pkg://`, the installed package's folder)."""
    path = config_path()
    if path.startswith("pkg://"):
        spec = importlib.util.find_spec("kernelarc.conf")
        locations = list(spec.submodule_search_locations or []) if spec else []
        return Path(locations[0]) if locations else Path(path)
    return Path(path)


def launcher_names() -> list[str]:
    """The launcher configs of conf/hydra/launcher (besides Hydra's own `basic`)."""
    return sorted(p.stem for p in (config_dir() / "hydra" / "launcher").glob("*.yaml"))


def launcher_check(args: list[str]) -> None:
    """Refuse `hydra/launcher=NAME` when NAME's plugin is not installed.

    Raises:
        ConfigError: names the launcher and the install command.
    """
    for arg in args:
        key, _, value = arg.partition("=")
        if key.lstrip("+") != "hydra/launcher":
            continue
        plugin = LAUNCHER_PLUGINS.get(value)
        if plugin is not None and importlib.util.find_spec(plugin) is None:
            msg = (
                f"{arg}: the {value} launcher's Hydra plugin ({plugin}) is not installed; "
                "install the launchers with `pip install 'kernelarc[launchers]'` (in a "
                "checkout: `.venv/bin/pip install -e '.[launchers]'`), or drop it to run the "
                "sweep's jobs one after another"
            )
            raise ConfigError(msg)


def _builtins() -> str:
    return ", ".join(builtin_names())


def _launchers() -> str:
    return ", ".join(["basic (default: one job after another)", *launcher_names()])
