"""A plain, aligned table for the CLI's listings.

rich's ``Table`` measures, wraps and boxes every cell: a page of 50 workflows took 40-150 ms to
print on a 2-core machine, more than the query behind it. Listings need none of that: cells are
short and one line, so columns are padded to their widest cell, headers are bold, a rule goes
under them, and cells keep their style (a status's colour). A long cell widens its column
rather than wrapping; the terminal folds the line if it must.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from sagaway.cli._format import safe

Cell = str | Text
"""Plain text (printed as it is: no markup, control characters escaped) or styled text."""

_GAP = "  "


class PlainTable:
    """Rows of cells under a title and column headers, printed aligned."""

    def __init__(self, title: str, columns: tuple[str, ...]) -> None:
        self.title = title
        self.columns = columns
        self.rows: list[tuple[Text, ...]] = []

    def add_row(self, *cells: Cell) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(tuple(c if isinstance(c, Text) else Text(safe(c)) for c in cells))

    def render(self) -> Text:
        widths = [cell_len(c) for c in self.columns]
        for row in self.rows:
            for i, cell in enumerate(row):
                widths[i] = max(widths[i], cell.cell_len)
        out = Text(safe(self.title), style="italic")
        out.append("\n")
        for i, column in enumerate(self.columns):
            out.append(_pad(column, widths[i], last=i == len(self.columns) - 1), style="bold")
        out.append("\n")
        out.append(_GAP.join("─" * w for w in widths), style="dim")
        for row in self.rows:
            out.append("\n")
            for i, cell in enumerate(row):
                out.append_text(cell)
                if i < len(row) - 1:
                    out.append(" " * (widths[i] - cell.cell_len) + _GAP)
        return out

    def print(self, console: Console) -> None:
        console.print(self.render(), soft_wrap=True, highlight=False)


def _pad(text: str, width: int, *, last: bool) -> str:
    return text if last else text + " " * (width - cell_len(text)) + _GAP
