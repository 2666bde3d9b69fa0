"""``python -m yao_actors.cli``: the ``yao-actors`` command (what ``serve --workers`` starts each worker with)."""

import sys

from yao_actors.cli import main

sys.exit(main())
