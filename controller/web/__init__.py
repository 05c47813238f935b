"""The web servers' common part: what the table display (controller/display) and the witness's
floor dashboard (controller/witness/dashboard.py) both serve with.

``capped``: a TCP server with a thread per client and bounds on its clients (how many, how many
from one address, slots only the box's own address takes), which drops a client that does not
take what it is sent; ``clients``: whether a client reads, and where it comes from;
``pages``: the HTTP side (a capped server's 503, the bounded request reader, the watched writer,
a page's files from its package); ``sse``: one Server-Sent Event as the streams send it.

May import: ``controller.errors`` and the standard library.
"""
