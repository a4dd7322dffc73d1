"""Generated code of the Engine Server protocol (proto/sagaway/v1/engine.proto); regenerate
with `python scripts/gen_proto.py`, never edit by hand."""
