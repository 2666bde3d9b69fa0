"""The MCP tool core: what turns a model's tool calls into calls to MCP servers and their results back.

One module per step, from the bottom up: :mod:`.results` (what a call gave, as values and as the model's text),
:mod:`.naming` (flat tool names and their table), :mod:`.schema_check` and :mod:`.arguments` (a model's argument
string made into a validated object), :mod:`.server_handle` and :mod:`.server_actor` (one supervised actor per MCP
server, and the handle others call it through; :mod:`.input_requests`, what a server asks the user during a
call), :mod:`.catalog` (the tools a model is offered) and :mod:`.dispatch` (one turn's calls, every server at once). Nothing here knows about runs, events or the service.
"""
