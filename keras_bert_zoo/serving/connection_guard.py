"""`ConnectionGuard`: the server's HTTP connections, bounded so idle ones cannot starve real clients.

A slow-loris client opens thousands of connections and sends nothing (or a header a byte at a
time). Uvicorn's protocol has a keep-alive timeout after a response but none before a request's
headers are complete, and no limit on connections: each open one holds a file descriptor until
the process has none left, and then nothing is accepted at all (and every failed accept is
logged). So, on top of uvicorn's httptools protocol:

- a header timeout: a connection that has not completed a request's headers `header_timeout_s`
  after it opened (or after that request's first byte) is closed;
- a connection limit: where more than `max_connections` are open, the least recently active
  connection that has no request in progress is closed to make room (an idle or half-open one,
  typically the attacker's; a client between keep-alive requests reconnects), so a new client is
  always accepted and answered; where every connection is busy, the newest is closed;
- `raise_fd_limit`: the process's soft limit of open files raised to its hard limit, so the
  connection limit, not the descriptor table, is what bounds the connections.

`ConnectionGuard` holds the open connections in order of activity and counts what it closed (the
server's `/metrics` reports both counts); `guarded_http_protocol.GuardedHttpProtocol` is the
protocol that reports to it and keeps the header timeout.
"""

import collections
import resource

RESERVED_FDS = 64  # descriptors kept for the model's files, logs and the listening socket


def raise_fd_limit():
    """Raises the soft limit of open files to the hard limit; returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass  # the limit stays; `connection_limit` fits within it
    return soft


def connection_limit(requested, fd_limit):
    """The connections the server holds at most: `requested`, within what the descriptors allow."""
    return max(1, min(int(requested), int(fd_limit) - RESERVED_FDS))


class ConnectionGuard:
    """The server's open connections, least recently active first, and what it closed.

    Args:
        max_connections: int. Connections held at most (see the module docstring).
        header_timeout_s: float. Seconds a request's headers may take.
    """

    def __init__(self, max_connections, header_timeout_s):
        self.max_connections = int(max_connections)
        self.header_timeout_s = float(header_timeout_s)
        self.open = collections.OrderedDict()
        self.evicted = 0
        self.timed_out = 0

    def opened(self, protocol):
        """Registers a new connection; closes the least recently active idle one beyond the limit."""
        self.open[protocol] = None
        if len(self.open) <= self.max_connections:
            return
        for other in self.open:
            if other is not protocol and other.idle():
                break
        else:
            other = protocol  # every other connection has a request in progress: the newest goes
        self.open.pop(other)  # now, not when the transport reports it lost: it is gone for the count
        self.evicted += 1
        other.close()

    def active(self, protocol):
        """Marks a connection as the most recently active (a request started on it)."""
        if protocol in self.open:
            self.open.move_to_end(protocol)

    def closed(self, protocol):
        self.open.pop(protocol, None)
