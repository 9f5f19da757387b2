"""The connection core: bytes on the descriptors, JSON-RPC framing, dispatch and the requests we send."""
