"""What a person reads on a console page, for the page tests: the text without tags, and the
tables as rows of cell texts."""

import re
from html import unescape


def text(html: str) -> str:
    """What a person reads: tags dropped, entities decoded, white space folded."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def rows(html: str) -> list[list[str]]:
    """Every table row of the page, as the text of its cells."""
    return [
        [text(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)
    ]


def row_of(html: str, first_cell: str) -> list[str]:
    found = [r for r in rows(html) if r and r[0].startswith(first_cell)]
    assert len(found) == 1, rows(html)
    return found[0]
