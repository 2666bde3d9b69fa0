"""MCP servers behind OAuth 2.1: the key tokens are sealed with, the token vault in the store, the SDK's flow.

- :mod:`.keys`: which servers need OAuth, and whether the store has the key their tokens need.
- :mod:`.cipher`: tokens sealed with AES-256-GCM under a key derived from ``store.secret_key``.
- :mod:`.vault`: tokens and client registrations in the conversation store, and the SDK's ``TokenStorage`` on them.
- :mod:`.flow`: the SDK's ``OAuthClientProvider`` on a server actor's connection, and ``yao-actors auth login``.
"""
