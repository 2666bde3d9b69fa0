"""Interrupts: where a run stops for someone and a later run goes on.

Calls held for a person's approval (:mod:`.approvals`), a server's questions to the user (:mod:`.inputs`), the
client's own tools, answered by the client's next run (:mod:`.client_tools`), and servers the run's principal
must authorize first (:mod:`.principal_servers`).
"""
