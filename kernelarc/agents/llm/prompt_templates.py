"""The prompt templates (package data in kernelarc/agents/llm/prompts/) and their tiny renderer.

Place in the flow: `prompt_builder` fills the templates with `string.Template` (`$name`
placeholders; `$$` is a literal dollar). Substituted values are never re-scanned, so a
definition or kernel that contains `$` is safe.
"""

import functools
import string
from importlib import resources

from kernelarc.errors import ConfigError

_PACKAGE = "kernelarc.agents.llm"
_FOLDER = "prompts"


@functools.cache
def load_template(name: str) -> string.Template:
    """The template `prompts/<name>.md` (e.g. `system`, `strategies/fusion`).

    Raises:
        ConfigError: the template is missing from the installed package.
    """
    resource = resources.files(_PACKAGE).joinpath(_FOLDER, f"{name}.md")
    try:
        return string.Template(resource.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        msg = (
            f"prompt template {_FOLDER}/{name}.md is missing from {_PACKAGE}; reinstall KernelArc "
            "(the prompts are package data)"
        )
        raise ConfigError(msg) from exc


def render(name: str, **fields: object) -> str:
    """`prompts/<name>.md` with every `$field` replaced.

    Raises:
        ConfigError: the template is missing or uses a field not given.
    """
    try:
        return load_template(name).substitute({k: str(v) for k, v in fields.items()}).strip()
    except KeyError as exc:
        msg = f"prompt template {_FOLDER}/{name}.md uses ${exc.args[0]}, which is not provided"
        raise ConfigError(msg) from exc
