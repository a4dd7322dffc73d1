"""Migrations may share text through fragments (``-- use: <name>``, resolved when a migration
is loaded), but what a database runs must not change: the resolved text of every migration that
shipped before fragments existed is the text it had, byte for byte (its SHA-256 then)."""

from __future__ import annotations

import hashlib

import pytest

from sagaway.store import migrations as m

SHIPPED: dict[str, str] = {
    "sqlite/0001_init.sql": "e6482191752bb2d49eaa777bd8e3bd65",
    "sqlite/0002_signals_and_waits.sql": "c08c0e7d4e69cdf882f99d6a7a0d55f7",
    "sqlite/0003_workflow_queues.sql": "b0c2467e8b57bf363e6b785c69192c77",
    "sqlite/0004_key_spaces.sql": "f7423e5a59fee313d2bb4effd51d8a11",
    "sqlite/0005_signal_sender.sql": "285846cf45d8081d775af97e4739cca2",
    "sqlite/0006_cancel_requests.sql": "17eae92556b3cfcda5c62a22ec1f73e0",
    "sqlite/0007_purge.sql": "ff1e5a45a250af161ec47997d3077711",
    "sqlite/0008_attempt_errors.sql": "61b44c74ed814694f9241ff01da6f09a",
    "sqlite/0009_trace_context.sql": "2c8373c470f21b3a657b5299af36a638",
    "sqlite/0010_code_version.sql": "bc12b15dfe8012f6cac6dd9462e7fb02",
    "sqlite/0011_schedules.sql": "ec6e395537500d15cc6a452878ae95b3",
    "sqlite/0012_limits.sql": "7339834d9cda2f43f47204b3ec07f720",
    "sqlite/0013_history_indexes.sql": "a0ed013791505c3ace31b35655d82eda",
    "sqlite/0014_child_waiters.sql": "4a1a60cb98b9f6613afae5ad7e3e87e1",
    "sqlite/0015_superseded_attempt_errors.sql": "4515ced51d45cc16e163bc32f4ede730",
    "sqlite/0016_cancel_log.sql": "52e4e25fe1d7d431c6f0c1d72cbabd17",
    "sqlite/0017_child_readers.sql": "490372fa66864f81c7d4f0cbd7e6a360",
    "sqlite/0018_audit_log.sql": "5dda3126bda7bed91e27d732a93fb2f9",
    "postgres/0001_init.sql": "480c88f5dae0fa2344f3d4f3a7342e3b",
    "postgres/0002_signals_and_waits.sql": "b546414c6a1ccb689e2fe18e5e917ecf",
    "postgres/0003_notify.sql": "79654ac2323b28fa1bef5b8d3c01e861",
    "postgres/0004_workflow_queues.sql": "2c846d9101c3c4099e2db6f859a25233",
    "postgres/0005_coalesced_ready_notices.sql": "602f27b90e1cc1bfb83018265dd1705c",
    "postgres/0006_key_spaces.sql": "f38ec6164431c6a9a506a2d8b54ab5d8",
    "postgres/0007_signal_sender.sql": "09bd0e93d1d3f1f7ac22a7519d47939a",
    "postgres/0008_cancel_requests.sql": "3fbc9758a4d165e0206384c2741f9e5f",
    "postgres/0009_purge.sql": "e1bd0674199d575855d63d8a0ae9bf0b",
    "postgres/0010_attempt_errors.sql": "a189ea40f817ebec0f0a9557eea33a39",
    "postgres/0011_trace_context.sql": "7a7b7f9f211d4c8fcab7dab38281c38f",
    "postgres/0012_code_version.sql": "a0e817517a732eaf9a4c18a9d06ea2a5",
    "postgres/0013_schedules.sql": "6b9df6db6178dcd137ab5053aa49047b",
    "postgres/0014_limits.sql": "059475b2cbc9763e3f76275c78a0ae7b",
    "postgres/0015_history_indexes.sql": "ca2951f6526eceb75e0f96800edc61d6",
    "postgres/0016_addressed_notices.sql": "6f1d488af27e4becca19042f6ec9fb68",
    "postgres/0017_child_waiters.sql": "ee1b0e998466d17a9adf4630445d8695",
    "postgres/0018_superseded_attempt_errors.sql": "8ae77a0f9ee78ad9fdd78850be4cc0be",
    "postgres/0019_self_ends_unannounced.sql": "37ca078b6b435adb8a8ea6f6f74994b3",
    "postgres/0020_cancel_log.sql": "235094814aa2cf64708e243cc4291e6a",
    "postgres/0021_child_readers.sql": "e48ce6b57bafd3225a283bd3d8bbbba3",
    "postgres/0022_audit_log.sql": "d34ab3e19548c3f26c57ed03a6c05a40",
    "postgres/0023_function_search_path.sql": "e1fce7989a423042472d49444f622393",
}
"""``<dialect>/<file>`` -> SHA-256 of its text before fragments (taken from the files then;
its first 32 hex digits)."""


@pytest.mark.parametrize("where", sorted(SHIPPED))
def test_a_resolved_migration_is_the_text_it_shipped_with(where: str) -> None:
    dialect, _, file = where.partition("/")
    number, _, rest = file.partition("_")
    found = {(x.version, x.name): x.sql for x in m.migrations(dialect)}
    text = found[int(number), rest.removesuffix(".sql")]
    assert hashlib.sha256(text.encode()).hexdigest()[:32] == SHIPPED[where]


def test_fragments_nest_and_an_unknown_one_is_an_error() -> None:
    fragments = {"a": "A1\n-- use: b\nA2\n", "b": "B\n"}
    assert m.resolve("x\n-- use: a\ny", fragments) == "x\nA1\nB\nA2\ny"
    assert m.resolve("x\n  -- use: b\n", fragments) == "x\nB\n"
    with pytest.raises(KeyError, match="nope"):
        m.resolve("-- use: nope\n", fragments)
