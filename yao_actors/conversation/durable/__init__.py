"""Durability: what a run writes to the conversation store, when, and how a stored run is read back.

:mod:`.journal` writes a run's history and events behind it (an event reaches a client only once it is in the
run's stored log), :mod:`.pacing` says when its writer writes, :mod:`.close_out` is the run's end as values the
actor reads. :mod:`.leasing` is the thread's lease when several processes share a store, :mod:`.replay` the
stored threads and runs read back.
"""
