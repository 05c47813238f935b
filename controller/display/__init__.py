"""The table display and the result feed.

Owns the web page's server and its Server-Sent Events (``server``, serving with the web
servers' common part in controller/web), the shared state the control thread publishes into
(``hub``), what the page and the feed say (``events``, pure), the result feed for
table-management systems (``feed``), the reader of the audit log for catching clients up
(``log_reader``), the terminal rendering and the fan-out to several displays (``console``),
and the page itself (``assets/``: HTML, CSS, JavaScript; nothing loaded from outside the box).

May import: ``controller.core``, ``controller.ports``, ``controller.web``,
``controller.audit.log`` (read-only connections), ``controller.errors`` and the standard library.
"""
