"""What every `kernelarc` command prints through: its consoles, its tables (Rich on a terminal,
plain complete lines elsewhere) and its errors (one `error:` line; the exit status is the
caller's, 2 for bad input).

Place in the flow: every command module of `kernelarc.cli` imports this one and no other command
module, so the commands share their output rules without importing each other. The tables of
eval, report, export --verify and the campaign's view are printed here. On a terminal a Rich
table fits the window; piped into a file or a CI log, Rich would cut every cell to 80 columns
(`draf…`, two arms both reading `coordination=…`), so there each row is one plain line, columns
aligned with spaces, nothing cut.
"""

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

USAGE_ERROR = 2
"""Exit status of a command refused for its input (a KernelarcError: bad config, problem,
solution or argument), as argparse exits for a bad command line."""


def make_console(stderr: bool = False) -> Console:
    """A console for the commands' output; off a terminal it never wraps or cuts a line."""
    console = Console(stderr=stderr)
    if not console.is_terminal:
        # No width limit: a line is as long as its content (Rich's default is 80 columns).
        console = Console(stderr=stderr, width=100_000, soft_wrap=True, no_color=True)
    return console


def print_table(
    console: Console,
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    caption: str = "",
) -> None:
    """A Rich table on a terminal; elsewhere the title, an aligned header and one line per row."""
    if console.is_terminal:
        table = Table(title=title, caption=caption or None)
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*(escape(cell) for cell in row))
        console.print(table)
        return
    for line in plain_table(title, columns, rows, caption):
        console.print(line, markup=False, highlight=False)


def plain_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], caption: str = ""
) -> list[str]:
    """The table as plain lines: title, header, rows (columns padded to their widest cell)."""
    widths = [len(c) for c in columns]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = [title] if title else []
    for cells in [list(columns), *[list(r) for r in rows]]:
        padded = [cell.ljust(w) for cell, w in zip(cells, widths, strict=True)]
        lines.append("  ".join(padded).rstrip())
    if caption:
        lines.append(caption)
    return lines


def print_error(exc: BaseException, console: Console | None = None) -> None:
    """`error: TEXT` on its own line (stderr unless `console` is given), the text escaped:
    `[compiler,llm:tiling]` in a message is not Rich markup."""
    target = console if console is not None else Console(stderr=True)
    target.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
