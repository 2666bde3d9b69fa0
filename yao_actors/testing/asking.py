"""An MCP server whose tools ask the user: the three ways the MCP SDK offers, for tests and the docs.

``build_asking_server()`` returns a fresh ``MCPServer``; ``python -m
yao_actors.testing.asking`` serves it over stdio, or over streamable HTTP with
``--http`` (printing ``LISTENING http://HOST:PORT/mcp`` once bound).

Tools:

- ``greet`` asks through ``ctx.elicit(...)`` (a form): handshake-era connections only
  (on 2026-07-28 the SDK has no back-channel for it, and the call fails);
- ``sign_in`` asks through ``ctx.elicit_url(...)`` (a URL to visit): handshake-era only;
- ``visit`` asks the user to visit whatever URL it is given, as a hostile server might (handshake-era only);
- ``book`` asks through a resolver (``Resolve(fn)`` returning ``Elicit[Booking]``): mid-call on
  handshake-era connections, as an ``InputRequiredResult`` on 2026-07-28 ones;
- ``bookings`` says how many times ``book`` ran to its end (each answer completes at most one).
"""

from __future__ import annotations

import argparse
from typing import Annotated, Any, Literal

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel, Field

from yao_actors.testing.servers import run_server, serving_options


class Name(BaseModel):
    name: str = Field(description="Your name")


class Booking(BaseModel):
    date: str = Field(description="Day of the stay, YYYY-MM-DD")
    guests: int = Field(description="How many guests", ge=1, le=8)
    seat: Literal["window", "aisle"] = Field(description="Seat")
    breakfast: bool = Field(default=False, description="Breakfast included")


async def ask_booking(hotel: str) -> Elicit[Booking]:
    return Elicit(f"Booking {hotel}: which day, how many guests?", Booking)


def build_asking_server(name: str = "asking") -> MCPServer:
    """A fresh server with the asking tools (its ``bookings`` count starts at 0)."""
    server = MCPServer(name)
    completed = {"book": 0}

    @server.tool(description="Greet the user by the name they give (asks with ctx.elicit).")
    async def greet(ctx: Context) -> dict[str, Any]:
        answer = await ctx.elicit("What is your name?", Name)
        if isinstance(answer, AcceptedElicitation):
            return {"greeting": f"Hello, {answer.data.name}!"}
        return {"action": answer.action}

    @server.tool(description="Ask the user to sign in on a web page (asks with ctx.elicit_url).")
    async def sign_in(ctx: Context) -> dict[str, Any]:
        answer = await ctx.elicit_url("Sign in to continue", "https://example.com/login?flow=42", "login-42")
        return {"action": answer.action}

    @server.tool(description="Ask the user to visit the URL given (any URL, as a hostile server might).")
    async def visit(url: str, ctx: Context) -> dict[str, Any]:
        answer = await ctx.elicit_url("Open this page", url, "visit-1")
        return {"action": answer.action}

    @server.tool(description="Book a hotel room; asks the user for the day and the number of guests.")
    async def book(hotel: str, booking: Annotated[ElicitationResult[Booking], Resolve(ask_booking)]) -> dict[str, Any]:
        if not isinstance(booking, AcceptedElicitation):
            return {"booked": False, "action": booking.action}
        completed["book"] += 1
        return {"booked": True, "hotel": hotel, **booking.data.model_dump(), "count": completed["book"]}

    @server.tool(description="How many bookings were completed.")
    async def bookings() -> dict[str, Any]:
        return {"count": completed["book"]}

    return server


def main(argv: list[str] | None = None) -> None:
    """Command line: serve the asking server over stdio, or over streamable HTTP with ``--http``."""
    parser = serving_options(argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None))
    run_server(build_asking_server(), parser.parse_args(argv), "asking server started")


if __name__ == "__main__":
    main()
