"""The loop: the steps of one run for one assistant over one conversation.

:mod:`.run` goes create hook → request → first model call → argument-retry block → ``next`` hook │ tool loop │
standard response → fallback assistant when the loop fails; :mod:`.answer` is how one assistant's answer ends,
:mod:`.resources` what a run may use, :mod:`.batch` a batch of tool calls in flight. The request a model call
carries is built by :mod:`.prompt` (from the history :mod:`.window` keeps); :mod:`.hooks` are the assistants'
``create``/``next`` hooks and :mod:`.fallback` the assistant that answers when the loop fails.
"""
