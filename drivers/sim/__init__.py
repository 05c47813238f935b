"""Simulated hardware behind the real drivers, for tests and ``simulate``.

``hardware``: the shaker's mechanics and the panel on gpiozero's MockFactory pins (the real
drivers run on them unchanged). ``sensor``: the DS1 optical dice sensor on a real
pseudo-terminal or a socket, with fault injection. Nothing in the product imports these except
the simulation's composition root (``controller.app.simulate``).
"""
