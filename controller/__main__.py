"""``python -m controller`` is ``paigow-controller``."""

from controller.cli import main

raise SystemExit(main())
