"""The console's request handlers, one module per page family."""
