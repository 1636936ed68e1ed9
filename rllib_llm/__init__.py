"""rllib-llm: RL for multi-turn LLM agents on Ray RLlib's new API stack."""

from rllib_llm.moved_modules import install as _install_moved_modules

__version__ = "0.1.0"

_install_moved_modules()  # old import paths (rllib_llm.cli, ...) keep working for one release, with a warning
