"""The seed's demo MCP servers: ``weather`` (``get(city)``) and ``clothing`` (``advise(temp, wind)``)."""
