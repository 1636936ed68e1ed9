"""Third-party notices nobody can act on are dropped at their logger; warnings that call for action still print."""

from __future__ import annotations

import logging

import pytest

from rllib_llm.log_notices import DropNotices
from rllib_llm.run.quiet import NOTICES, quiet_third_party_notices


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def collect():
    handlers = []

    def attach(name: str) -> Collect:
        handler = Collect()
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        handlers.append((logger, handler))
        return handler

    yield attach
    for logger, handler in handlers:
        logger.removeHandler(handler)


def test_ray_token_notice_is_dropped_but_the_disabled_warning_is_kept(collect):
    from ray._private.authentication import authentication_token_setup as auth

    quiet_third_party_notices()
    quiet_third_party_notices()  # idempotent: one filter per logger
    logger = logging.getLogger(auth.__name__)
    assert auth.__name__ in NOTICES and sum(isinstance(f, DropNotices) for f in logger.filters) == 1
    seen = collect(auth.__name__)
    auth._warn_token_auth_enabled()
    auth._warn_token_auth_disabled()
    assert len(seen.messages) == 1 and seen.messages[0].startswith("Token authentication is disabled")


def test_gputil_and_mlflow_store_notices_are_dropped_and_other_messages_pass(collect):
    quiet_third_party_notices()
    tune_util, mlflow_db = collect("ray.tune.utils.util"), collect("mlflow.store.db.utils")
    logging.getLogger("ray.tune.utils.util").warning("Install gputil for GPU system monitoring.")
    logging.getLogger("ray.tune.utils.util").warning("Install psutil to monitor system performance.")
    store_logger = logging.getLogger("mlflow.store.db.utils")
    level = store_logger.level
    store_logger.setLevel(logging.INFO)
    try:
        store_logger.info("Creating initial MLflow database tables...")
        store_logger.warning("Database is locked")
    finally:
        store_logger.setLevel(level)
    assert tune_util.messages == ["Install psutil to monitor system performance."]
    assert mlflow_db.messages == ["Database is locked"]


def test_transformers_progress_bars_are_off():
    from transformers.utils import logging as transformers_logging

    transformers_logging.enable_progress_bar()
    quiet_third_party_notices()
    assert not transformers_logging.is_progress_bar_enabled()


def test_a_second_set_of_notices_for_one_logger_extends_its_filter(collect):
    """The CLI's notices and a backend's (vLLM's) share one mechanism: a logger keeps one filter, whose
    message starts grow when another set names the same logger."""
    from rllib_llm.log_notices import drop_notices

    name = "rllib_llm.tests.notices"
    handler = collect(name)
    drop_notices({name: ("first notice",)})
    drop_notices({name: ("second notice", "first notice")})
    logger = logging.getLogger(name)
    for message in ("first notice here", "second notice here", "a real warning"):
        logger.warning(message)
    assert handler.messages == ["a real warning"]
    assert [f.starts for f in logger.filters if isinstance(f, DropNotices)] == [("first notice", "second notice")]
