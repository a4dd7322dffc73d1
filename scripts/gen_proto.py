"""Generate the Python code of the Engine Server's protocol from proto/sagaway/v1/engine.proto.

    python scripts/gen_proto.py          # write src/sagaway/v1/engine_pb2*.py(i)
    python scripts/gen_proto.py --check  # exit 1 if the committed code is stale

Needs grpcio-tools and mypy-protobuf (the ``dev`` extra).
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO = Path("sagaway/v1/engine.proto")
OUT = ROOT / "src" / "sagaway" / "v1"
BIN = Path(sys.executable).parent
"""Where pip put mypy-protobuf's protoc plugins (beside this interpreter)."""
GENERATED = ("engine_pb2.py", "engine_pb2.pyi", "engine_pb2_grpc.py", "engine_pb2_grpc.pyi")


def generate(into: Path) -> None:
    """Run protoc (from grpcio-tools) with the mypy-protobuf plugins into ``into``."""
    command = [
        sys.executable,
        "-m",
        "grpc_tools.protoc",
        f"-I{ROOT / 'proto'}",
        f"--python_out={into}",
        f"--grpc_python_out={into}",
        f"--plugin=protoc-gen-mypy={BIN / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={BIN / 'protoc-gen-mypy_grpc'}",
        f"--mypy_out={into}",
        f"--mypy_grpc_out={into}",
        str(PROTO),
    ]
    subprocess.run(command, check=True, cwd=ROOT)


def stale_files() -> list[str]:
    """The generated files that differ from what the .proto produces now."""
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        made = Path(tmp) / "sagaway" / "v1"
        return [
            name
            for name in GENERATED
            if not (OUT / name).exists() or not filecmp.cmp(made / name, OUT / name, shallow=False)
        ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the generated code is stale")
    if parser.parse_args().check:
        stale = stale_files()
        if stale:
            print(f"stale: {', '.join(stale)}; run: python scripts/gen_proto.py", file=sys.stderr)
            return 1
        print("generated code is up to date")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp))
        OUT.mkdir(parents=True, exist_ok=True)
        for name in GENERATED:
            shutil.copyfile(Path(tmp) / "sagaway" / "v1" / name, OUT / name)
    print(f"wrote {', '.join(GENERATED)} to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
