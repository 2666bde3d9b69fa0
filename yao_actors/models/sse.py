"""An incremental server-sent events decoder, fed with raw bytes as they arrive.

The OpenAI-compatible client reads a response body chunk by chunk, each read
under its own deadline, and feeds the bytes here. The decoder follows the SSE
specification closely enough for model endpoints: lines end in LF, CRLF or CR;
``data:`` lines of one event are joined with ``\\n``; lines starting with ``:``
are comments (keep-alives); a blank line ends an event; UTF-8 sequences split
across chunks are reassembled, and bytes that are not UTF-8 become U+FFFD.
"""

from __future__ import annotations

import codecs

import attrs


def _split_lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


@attrs.frozen
class ServerSentEvent:
    """One event: its type (``"message"`` unless named) and its joined data."""

    data: str
    event: str = "message"


@attrs.define
class SSEDecoder:
    """Turns a byte stream into :class:`ServerSentEvent` values.

    Call :meth:`feed` with each chunk and :meth:`flush` at the end of the body;
    both return the events completed so far.
    """

    _text: codecs.IncrementalDecoder = attrs.field(
        factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace")
    )
    _partial_line: str = ""
    _data: list[str] = attrs.field(factory=list)
    _event: str = ""

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` and return the events it completed."""
        text = self._partial_line + self._text.decode(chunk)
        # A trailing CR may be the first half of a CRLF: keep it until more arrives.
        keep_cr = text.endswith("\r")
        lines = _split_lines(text[:-1] if keep_cr else text)
        self._partial_line = lines.pop() + ("\r" if keep_cr else "")
        return self._lines(lines)

    def flush(self) -> list[ServerSentEvent]:
        """End of the body: complete the last event even without its closing blank line.

        The specification drops such an event; endpoints that end with
        ``data: [DONE]\\n`` and close are common enough to be lenient.
        """
        rest = self._partial_line + self._text.decode(b"", final=True)
        self._partial_line = ""
        return self._lines([*_split_lines(rest), ""])

    def _lines(self, lines: list[str]) -> list[ServerSentEvent]:
        events = []
        for line in lines:
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = ServerSentEvent(data="\n".join(self._data), event=self._event or "message")
            self._data, self._event = [], ""
            return event
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        return None
