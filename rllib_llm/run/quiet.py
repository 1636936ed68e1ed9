"""Third-party notices a user of rllib-llm cannot act on, dropped where they are logged, so that what a run
prints is its own output. Each is matched by its logger and the start of its message (never a whole
library's level), so warnings that call for action still print (e.g. Ray's "token authentication is
disabled"). What each dropped notice meant:

- Ray, "Token authentication is enabled for this Ray cluster": the local Ray started by the CLI uses token
  authentication (Ray's safe default); nothing to do.
- Ray Tune's usage monitor, "Install gputil for GPU system monitoring": RLlib reports CPU and RAM use
  without it; GPU use is not in the results unless GPUtil is installed.
- MLflow, "Creating initial MLflow database tables..." / "Updating database tables": a new local store.
- transformers' "Loading weights" progress bars (one per model built: the Learner's, the EnvRunner's, the
  reference's): turned off; loading errors still raise.
"""

from __future__ import annotations

from rllib_llm.log_notices import drop_notices

#: logger name -> starts of the messages dropped from it.
NOTICES: dict[str, tuple[str, ...]] = {
    "ray._private.authentication.authentication_token_setup": ("Token authentication is enabled for this Ray",),
    "ray.tune.utils.util": ("Install gputil",),
    "mlflow.store.db.utils": ("Creating initial MLflow database tables", "Updating database tables"),
}


def quiet_third_party_notices() -> None:
    """Installs the filters of :data:`NOTICES` (once per logger) and turns transformers' progress bars off."""
    drop_notices(NOTICES)
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
