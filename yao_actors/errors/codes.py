"""The codes a run's failure goes to a client with: ``RUN_ERROR``'s :class:`RunErrorCode` and the service's
``error`` frame's :class:`ErrorFrameCode`; what each means is in the tables of their docstrings.
"""

from __future__ import annotations

import enum


class RunErrorCode(enum.StrEnum):
    """The ``code`` of a ``RUN_ERROR`` event (and of a ``SUBAGENT_ERROR``): why a run ended in error.

    =====================  ==========================================================================
    code                   meaning
    =====================  ==========================================================================
    ``bad_request``        the client's frame was not valid (field named in the message)
    ``frame_too_large``    the client's frame is over the service's ``max_frame_bytes``
    ``too_many_runs``      the connection, the principal or the service is at its limit of concurrent
                           runs
    ``shutting_down``      the service is shutting down and takes no new runs
    ``unknown_assistant``  the run named an assistant the configuration does not have
    ``unknown_thread``     the run named a thread another principal created (as if it did not exist)
    ``unknown_model``      an assistant's model (or fallback model) is not configured
    ``config_error``       the assistant's servers cannot form a catalog (e.g. colliding tool names)
    ``hook_error``         a ``create`` / ``next`` hook failed, returned a bad value, or delegated
                           too deep
    ``model_error``        a model call failed after its own retries (and so did the fallback)
    ``max_turns``          the tool loop used its ``max_turn`` turns and the assistant has
                           ``fallback: false``
    ``run_timeout``        the run's deadline (``timeouts.run``) expired
    ``internal_error``     a bug: an unexpected exception inside the run (logged with its traceback)
    ``run_incomplete``     a bug: the run ended without its terminal event; the service wrote one
    ``interrupted``        the process running the run ended first; a durable store closed the run
    ``store_unavailable``  the conversation store could not be reached or written (Redis down, file
                           unwritable)
    ``thread_busy``        another process ran the thread and still held its lease after
                           ``store.lease_wait``
    ``unknown_run``        a ``resume`` named a run that is not stored (or belongs to another
                           principal)
    ``run_ended``          (``SUBAGENT_ERROR`` only) the run ended before the subagent finished
    ``unknown_interrupt``  a ``resume`` entry named an interrupt the thread is not waiting for
    ``interrupt_expired``  a ``resume`` entry approved a call whose interrupt had expired (it was not
                           run), or answered a server's question whose open call the process holding
                           it no longer has
    ``invalid_resume``     a ``resume`` entry's answer to a server's question does not fit the
                           question's schema
    ``run_error``          a run failed for a reason no other code names
    =====================  ==========================================================================
    """

    BAD_REQUEST = "bad_request"
    FRAME_TOO_LARGE = "frame_too_large"
    TOO_MANY_RUNS = "too_many_runs"
    SHUTTING_DOWN = "shutting_down"
    UNKNOWN_ASSISTANT = "unknown_assistant"
    UNKNOWN_THREAD = "unknown_thread"
    UNKNOWN_MODEL = "unknown_model"
    CONFIG_ERROR = "config_error"
    HOOK_ERROR = "hook_error"
    MODEL_ERROR = "model_error"
    MAX_TURNS = "max_turns"
    RUN_TIMEOUT = "run_timeout"
    INTERNAL_ERROR = "internal_error"
    RUN_INCOMPLETE = "run_incomplete"
    INTERRUPTED = "interrupted"
    STORE_UNAVAILABLE = "store_unavailable"
    THREAD_BUSY = "thread_busy"
    UNKNOWN_RUN = "unknown_run"
    RUN_ENDED = "run_ended"
    UNKNOWN_INTERRUPT = "unknown_interrupt"
    INTERRUPT_EXPIRED = "interrupt_expired"
    INVALID_RESUME = "invalid_resume"
    RUN_ERROR = "run_error"


class ErrorFrameCode(enum.StrEnum):
    """The ``code`` of the service's non-terminal ``error`` frame, about a client frame rather than a run.

    =====================  ==========================================================================
    code                   meaning
    =====================  ==========================================================================
    ``duplicate_run_id``   a ``run`` frame reused the ``runId`` of a run still in flight (that run goes on)
    ``unknown_run``        a ``cancel`` frame named no run in flight on this connection
    ``unknown_thread``     a ``forget`` frame named a thread that is not stored (or is another principal's)
    ``store_unavailable``  the conversation store could not be reached for a ``history``, ``forget``, ``threads``
                           or ``resume`` frame (the resumed run is not over: resume again later)
    ``unknown_assistant``  a ``tools`` frame named no configured assistant
    =====================  ==========================================================================
    """

    DUPLICATE_RUN_ID = "duplicate_run_id"
    UNKNOWN_RUN = "unknown_run"
    UNKNOWN_THREAD = "unknown_thread"
    STORE_UNAVAILABLE = "store_unavailable"
    UNKNOWN_ASSISTANT = "unknown_assistant"
