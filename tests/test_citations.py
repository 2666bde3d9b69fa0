"""Nothing in the repository cites a document the repository does not hold: the design notes and the seed's
specification the project was first written from are not part of it, so a reader who meets "see §4.4" there has
nothing to open. Where such a rule matters, the code and docs say the rule (docs/contributing.md gathers them)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]

#: Citations of documents outside the repository (spelled in parts, so this file does not cite them itself).
OUTSIDE = re.compile(
    "|".join(
        (
            r"\bDESIGN" + r"(?:\.md\b|\s*§|\s+invariant)",
            r"reference/" + r"[\w.-]+\.md",
            r"\breference " + r"spec\b",
        )
    )
)


def citations(text: str) -> list[str]:
    """The citations of outside documents in ``text``, as found."""
    return [match.group(0) for match in OUTSIDE.finditer(text)]


def test_no_tracked_file_cites_a_document_outside_the_repository() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPOSITORY, capture_output=True, check=True, timeout=60
    ).stdout.decode()
    found = {}
    for name in filter(None, tracked.split("\0")):
        path = REPOSITORY / name
        if path.is_file():
            cited = citations(path.read_bytes().decode("utf-8", errors="replace"))
            if cited:
                found[name] = cited
    assert found == {}


def test_the_citations_it_refuses() -> None:
    cited = (
        "(DESIGN"
        + " §4.1), see DESIGN"
        + ".md, DESIGN"
        + " invariant 6, reference/"
        + "peers.md, reference"
        + " spec §7.3"
    )
    assert len(citations(cited)) == 5
    assert citations("the design of the run; a DESIGNER; RFC 6455 §5.2; the seed's spec") == []
