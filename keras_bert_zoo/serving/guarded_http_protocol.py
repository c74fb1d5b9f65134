"""`GuardedHttpProtocol`: uvicorn's httptools protocol with a header timeout and a connection limit.

See `connection_guard.py` for why (slow-loris connections) and what the limit closes.
"""

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class GuardedHttpProtocol(HttpToolsProtocol):
    """Uvicorn's httptools protocol with a header timeout and a connection limit (`ConnectionGuard`).

    Made for one server by `protocol_class(guard)` (uvicorn builds a protocol per connection from
    the class it is given)."""

    guard = None  # the server's ConnectionGuard, set by `protocol_class`
    header_timer = None

    def connection_made(self, transport):
        super().connection_made(transport)
        self.arm_header_timer()
        self.guard.opened(self)

    def connection_lost(self, exc):
        self.cancel_header_timer()
        self.guard.closed(self)
        super().connection_lost(exc)

    def on_message_begin(self):
        super().on_message_begin()
        self.guard.active(self)
        if self.header_timer is None:
            self.arm_header_timer()

    def on_headers_complete(self):
        self.cancel_header_timer()
        super().on_headers_complete()

    def idle(self):
        """Whether no request is in progress here (none started, or the last one answered)."""
        return self.cycle is None or self.cycle.response_complete

    def close(self):
        self.cancel_header_timer()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def arm_header_timer(self):
        self.header_timer = self.loop.call_later(self.guard.header_timeout_s, self.header_timed_out)

    def cancel_header_timer(self):
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def header_timed_out(self):
        self.header_timer = None
        self.guard.timed_out += 1
        self.close()


def protocol_class(guard):
    """A `GuardedHttpProtocol` class bound to `guard`, for `uvicorn.Config(http=...)`."""
    return type("GuardedHttpProtocol", (GuardedHttpProtocol,), {"guard": guard})
