"""Compiles proto/argen/v1/argen.proto into Python stubs (argen_pb2.py and
argen_pb2_grpc.py) in a directory, as a package whose grpc module imports its
messages relatively.

With grpcio-tools installed its bundled protoc runs; otherwise protoc and
grpc_python_plugin from PATH (Debian: protobuf-compiler, protobuf-compiler-grpc).
Run alone: python3 codegen.py OUT_DIR [PROTO_DIR].
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO = "argen/v1/argen.proto"


def proto_dir():
    configured = os.environ.get("ARGEN_PROTO_DIR")
    if configured:
        return configured
    return os.path.normpath(os.path.join(HERE, "..", "..", "proto"))


def _protoc(args):
    try:
        from grpc_tools import protoc  # type: ignore
        import importlib.resources as resources

        include = str(resources.files("grpc_tools") / "_proto")
        if protoc.main(["protoc", "-I" + include] + args) != 0:
            raise RuntimeError("grpc_tools.protoc failed on " + PROTO)
        return
    except ImportError:
        pass
    protoc_bin = shutil.which("protoc")
    plugin = shutil.which("grpc_python_plugin")
    if protoc_bin is None or plugin is None:
        raise RuntimeError(
            "cannot compile the gRPC stubs: install grpcio-tools (pip) or protoc and grpc_python_plugin "
            "(Debian: apt-get install protobuf-compiler protobuf-compiler-grpc)")
    subprocess.run([protoc_bin, "--plugin=protoc-gen-grpc_python=" + plugin] + args, check=True)


def generate(out_dir, proto_root=None):
    proto_root = proto_root or proto_dir()
    source = os.path.join(proto_root, PROTO)
    if not os.path.exists(source):
        raise RuntimeError(source + " not found (set ARGEN_PROTO_DIR to the repository's proto/ directory)")
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        _protoc(["-I" + proto_root, "--python_out=" + tmp, "--grpc_python_out=" + tmp, source])
        generated = os.path.join(tmp, "argen", "v1")
        for name in ("argen_pb2.py", "argen_pb2_grpc.py"):
            with open(os.path.join(generated, name)) as f:
                text = f.read()
            # The grpc module imports its messages by the proto's package path; here they sit beside it.
            text = text.replace("from argen.v1 import argen_pb2", "from . import argen_pb2")
            with open(os.path.join(out_dir, name), "w") as f:
                f.write(text)
    with open(os.path.join(out_dir, "__init__.py"), "w") as f:
        f.write('"""Generated from proto/argen/v1/argen.proto at build time; do not edit."""\n')


if __name__ == "__main__":
    generate(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
