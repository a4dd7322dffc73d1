"""The Engine Server: the Store contract over gRPC, so that applications need no database
access and many applications share one engine (``sagaway server``)."""
