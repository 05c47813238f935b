"""Log lines carry syslog priority prefixes so that journald keeps the levels."""

from __future__ import annotations

import io
import logging

from controller.app.logs import configure_logging


def test_priorities_and_multiline_messages() -> None:
    stream = io.StringIO()
    configure_logging(logging.DEBUG, stream)
    log = logging.getLogger("paigow.test")
    log.error("bad")
    log.warning("careful")
    log.info("note")
    log.debug("detail")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    lines = stream.getvalue().splitlines()
    assert lines[:4] == [
        "<3>paigow.test: bad",
        "<4>paigow.test: careful",
        "<6>paigow.test: note",
        "<7>paigow.test: detail",
    ]
    assert all(line.startswith("<3>") for line in lines[4:])
    assert any("ValueError: boom" in line for line in lines[4:])
    logging.getLogger().handlers.clear()
