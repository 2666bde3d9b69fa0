"""The service entry point: ``python server.py [--config FILE] [--host HOST] [--port PORT]``.

The same as ``yao-actors serve``: with no config it serves the embedded demo on 127.0.0.1:8765.
"""

import sys

from yao_actors.cli import main

if __name__ == "__main__":
    sys.argv[1:1] = ["serve"]
    sys.exit(main())
