"""Builds argen_client with its gRPC stubs compiled from proto/argen/v1/argen.proto.

The stubs are generated at build time, never committed: build_py runs
codegen.generate() into the build tree. The proto directory is found beside
this package in the repository (../../proto) or through ARGEN_PROTO_DIR.
"""
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import codegen  # noqa: E402


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        codegen.generate(os.path.join(self.build_lib, "argen_client", "_generated"))


setup(cmdclass={"build_py": BuildPyWithStubs})
