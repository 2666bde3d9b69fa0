"""Input the runtime does not control, each kind through one gate: :mod:`.json` (JSON from models, tools and files:
nesting bounded, lone surrogates replaced) and :mod:`.urls` (a server's URL before it reaches a person: https, or
http to this machine). Schemas from servers have theirs in :mod:`yao_actors.tools.schema_gate`."""
