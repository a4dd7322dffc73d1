"""The calls of a codec store that carry no payload: they go to the inner store unchanged."""

from __future__ import annotations

from sagaway.store.base import Store
from sagaway.store.forwarding import forward


class Passthrough:
    """Forwards the payload-free verbs of the Store contract to ``inner``."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.url = inner.url

    open = forward(Store.open, "inner")
    close = forward(Store.close, "inner")
    server_time = forward(Store.server_time, "inner")
    listen = forward(Store.listen, "inner")
    release_workflow = forward(Store.release_workflow, "inner")
    renew_leases = forward(Store.renew_leases, "inner")
    next_due = forward(Store.next_due, "inner")
    request_cancel = forward(Store.request_cancel, "inner")
    cancel_requests = forward(Store.cancel_requests, "inner")
    list_cancel_requests = forward(Store.list_cancel_requests, "inner")
    retry_now = forward(Store.retry_now, "inner")
    record_audit = forward(Store.record_audit, "inner")
    list_audit = forward(Store.list_audit, "inner")
    count_by_status = forward(Store.count_by_status, "inner")
    purge_ended = forward(Store.purge_ended, "inner")
    count_purgeable = forward(Store.count_purgeable, "inner")
    acquire_queue_slot = forward(Store.acquire_queue_slot, "inner")
    renew_queue_slot = forward(Store.renew_queue_slot, "inner")
    release_queue_slot = forward(Store.release_queue_slot, "inner")
    leave_queue = forward(Store.leave_queue, "inner")
    pause_workflow = forward(Store.pause_workflow, "inner")
    paused_runs = forward(Store.paused_runs, "inner")
    pause_calls = forward(Store.pause_calls, "inner")
    list_paused_calls = forward(Store.list_paused_calls, "inner")
    list_search_attributes = forward(Store.list_search_attributes, "inner")
    start_place = forward(Store.start_place, "inner")
    queue_place = forward(Store.queue_place, "inner")
