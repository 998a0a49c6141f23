"""Rich progress bars, one helper so every stage shows long work the same way."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


@contextlib.contextmanager
def progress_bar(
    description: str, *, total: int, enabled: bool = True
) -> Iterator[Callable[..., None]]:
    """Yield ``advance(n=1, description=None)``; draws nothing when ``enabled`` is false."""
    if not enabled:
        yield lambda n=1, description=None: None
        return
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task(description, total=total)

        def advance(n: int = 1, description: str | None = None) -> None:
            progress.update(
                task, advance=n, **({"description": description} if description else {})
            )

        yield advance
