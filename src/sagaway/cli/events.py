"""``sagaway events KEY``: what a workflow published (events and stream items), as ``tail``.

Without ``--follow`` it prints what is there now and exits; with it, it keeps printing as the
workflow publishes, and exits 0 once the workflow has ended and everything is printed (as
``tail -f`` / ``kubectl logs -f``, but it knows when the writer is done). Each line starts with
the item's ``seq`` (with ``--stream``: its offset): run it again with ``--after SEQ`` (or
``--offset N``) to resume where it stopped, without a gap or a repeat.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import click

import sagaway as sw
from sagaway.cli import _format
from sagaway.cli._options import json_option, position_option, utc_option
from sagaway.cli._support import codec_key_option, reading_codec, url_option, with_manager


def item_json(item: sw.OutputItem, clock: _format.Clock) -> dict[str, Any]:
    return clock.record(item, "seq kind name offset value at")


def item_text(item: sw.OutputItem, clock: _format.Clock, stream: bool) -> str:
    value = _format.safe(json.dumps(item.value, ensure_ascii=False))
    if stream:
        return f"{item.offset}\t{clock.text(item.at)}\t{value}"
    where = f"{item.name}[{item.offset}]" if item.kind == "stream" else f"{item.name} ="
    return f"{item.seq}\t{clock.text(item.at)}\t{item.kind}\t{_format.safe(where)} {value}"


@click.command()
@url_option
@codec_key_option
@click.argument("key")
@click.option("--stream", metavar="NAME", help="Only the items of this stream, by offset.")
@position_option("--after", "SEQ", "Only what was published after this seq (the first column).")
@position_option("--offset", "N", "With --stream: from this offset on.")
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Keep printing as the workflow publishes, until it has ended (exit 0).",
)
@json_option("One JSON object per line.")
@utc_option
def events(
    url: str | None,
    codec_key_file: str | None,
    key: str,
    stream: str | None,
    after: int,
    offset: int,
    follow: bool,
    as_json: bool,
    utc: bool,
) -> None:
    """Print the events and stream items the workflow KEY published (sw.set_event,
    sw.write_stream), oldest first; with --follow, until it has ended."""
    if offset and stream is None:
        raise click.UsageError("--offset reads one stream: give --stream NAME")
    if after and stream is not None:
        raise click.UsageError("with --stream, resume with --offset (--after is a seq)")
    clock = _format.Clock(utc)
    codec = reading_codec(codec_key_file)

    async def print_items(manager: sw.Manager) -> None:
        handle = manager.get_workflow(key)
        items: AsyncIterator[sw.OutputItem]
        if stream is not None:
            items = handle.read_stream(stream, offset=offset, follow=follow)
        else:
            items = handle.outputs(after=after, follow=follow)
        async for item in items:
            if as_json:
                click.echo(json.dumps(item_json(item, clock), ensure_ascii=False))
            else:
                click.echo(item_text(item, clock, stream is not None))

    with_manager(url, print_items, codec=codec)
