"""``python -m controller.witness``: the witness (controller/witness/main.py)."""

from controller.witness.main import main

raise SystemExit(main())
