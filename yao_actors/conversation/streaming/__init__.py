"""Streaming: a run's events as they are made and as they are read.

:mod:`.relay` turns one model call's stream of deltas into AG-UI events; :mod:`.outlet` is where a run's events
become visible (once stored, with a durable store) and the readers that follow them, with backpressure.
"""
