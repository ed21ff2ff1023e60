"""The Python client against a running argen_server (tests/goldens/tiny/tiny-mha):
installed with pip from a copy of clients/python (stubs compiled from proto/ at
build time, nothing from PyPI), then generate with previews and images, the
same seed giving the same PNGs, cancellation, errors naming the field, info,
health, and TLS with an API key.

Environment: ARGEN_SERVER_BIN (argen_server), ARGEN_SOURCE_DIR (the repository).
Run by ctest as python_client_test with Debian's python3 (python3-grpcio,
python3-protobuf, python3-pip, python3-setuptools, protobuf-compiler-grpc).
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

SOURCE = os.environ.get("ARGEN_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SERVER = os.environ.get("ARGEN_SERVER_BIN", "")
MODEL = os.path.join(SOURCE, "tests", "goldens", "tiny", "tiny-mha")
PNG = b"\x89PNG\r\n\x1a\n"


def install_client(into):
    """pip install of a copy of clients/python (no index, no build isolation: Debian's setuptools)."""
    copy = os.path.join(into, "src")
    shutil.copytree(os.path.join(SOURCE, "clients", "python"), copy,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "_generated", "__pycache__"))
    site = os.path.join(into, "site")
    env = dict(os.environ, ARGEN_PROTO_DIR=os.path.join(SOURCE, "proto"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps",
                    "--no-index", "--disable-pip-version-check", "--root-user-action=ignore", "--target", site, copy],
                   check=True, env=env, cwd=into)
    return site


class Server:
    """argen_server on free ports; its gRPC port read from its log."""

    def __init__(self, workdir, name, *flags):
        self.log_path = os.path.join(workdir, name + ".log")
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [SERVER, "--model_dir", MODEL, "--listen_address=127.0.0.1", "--port=0", "--metrics_port=-1",
             "--threads=1", *flags], stdout=self.log, stderr=subprocess.STDOUT)
        self.port = None
        deadline = time.time() + 60
        while self.port is None and time.time() < deadline:
            with open(self.log_path) as f:
                m = re.search(r"serving gRPC on [0-9.]+:([0-9]+)", f.read())
            if m:
                self.port = int(m.group(1))
            elif self.process.poll() is not None:
                break
            else:
                time.sleep(0.02)
        if self.port is None:
            self.stop()
            with open(self.log_path) as f:
                raise RuntimeError("argen_server did not start:\n" + f.read())
        self.target = "localhost:%d" % self.port

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not SERVER:
            raise RuntimeError("ARGEN_SERVER_BIN is not set")
        cls.tmp = tempfile.mkdtemp(prefix="argen_pyclient_")
        site = install_client(cls.tmp)
        sys.path.insert(0, site)
        import argen_client  # noqa: E402  (the installed copy)
        cls.argen_client = argen_client
        cls.installed_at = os.path.dirname(argen_client.__file__)
        cls.server = Server(cls.tmp, "plain")
        cls.client = argen_client.Client(cls.server.target)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_installed_with_stubs_generated_at_build_time(self):
        self.assertTrue(self.installed_at.startswith(self.tmp), self.installed_at)
        generated = os.path.join(self.installed_at, "_generated")
        self.assertTrue(os.path.exists(os.path.join(generated, "argen_pb2_grpc.py")))
        # Nothing generated is committed beside the sources.
        tracked = subprocess.run(["git", "-C", SOURCE, "ls-files", "clients/python"], capture_output=True, text=True)
        if tracked.returncode == 0:
            self.assertNotIn("_pb2", tracked.stdout)

    def test_info_and_health(self):
        info = self.client.info()
        self.assertEqual(info.model, "tiny-mha")
        self.assertGreater(info.max_images_per_request, 0)
        self.assertIn("diagonal", [p.name for p in info.policies])
        self.assertEqual(self.client.health(), "SERVING")
        self.assertEqual(self.client.health("argen.v1.ArGen"), "SERVING")

    def test_generate_streams_previews_then_images_as_png_bytes(self):
        generation = self.client.generate("a red square", n=2, seed=11, previews=2, policy="diagonal", sparsity=0.5)
        kinds = []
        previews, images = [], {}
        for event in generation:
            kinds.append(event.kind)
            if event.kind == "preview":
                previews.append(event.data.png)
            elif event.kind == "image":
                images[event.data.index] = event.data.png
        self.assertEqual(kinds[0], "accepted")
        self.assertEqual(kinds[-1], "metrics")
        self.assertTrue(generation.request_id)
        # Up to 2 per image (the server drops one the client has not made room for; never the first).
        self.assertGreaterEqual(len(previews), 1)
        self.assertLessEqual(len(previews), 4)
        self.assertEqual(sorted(images), [0, 1])
        for png in previews + list(images.values()):
            self.assertTrue(png.startswith(PNG))
        # The same seed: the same images, byte for byte.
        again = self.client.generate("a red square", n=2, seed=11, policy="diagonal", sparsity=0.5).images()
        self.assertEqual(again, [images[0], images[1]])

    def test_cancel_ends_the_stream_and_the_server_goes_on(self):
        generation = self.client.generate("a long one", n=1, seed=1)
        seen = []
        for event in generation:
            seen.append(event.kind)
            if event.kind == "accepted":
                generation.cancel()
        self.assertTrue(generation.cancelled)
        self.assertNotIn("image", seen)
        self.assertEqual(len(self.client.generate("after", seed=2).images()), 1)

    def test_errors_name_the_field(self):
        with self.assertRaises(self.argen_client.ArgenError) as caught:
            self.client.generate("x", policy="nope").images()
        self.assertEqual(caught.exception.code.name, "INVALID_ARGUMENT")
        self.assertIn("policy", caught.exception.message)

    def test_tls_and_api_keys(self):
        cert = os.path.join(self.tmp, "server.pem")
        key = os.path.join(self.tmp, "server.key")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "1", "-subj", "/CN=localhost", "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True, capture_output=True)
        keys = os.path.join(self.tmp, "keys")
        with open(keys, "w") as f:
            f.write("py %s\n" % hashlib.sha256(b"py-secret").hexdigest())
        server = Server(self.tmp, "tls", "--tls.cert_file", cert, "--tls.key_file", key,
                        "--auth.api_keys_file", keys)
        try:
            Client = self.argen_client.Client
            with Client(server.target, root_certificates=cert, api_key="py-secret") as good:
                self.assertEqual(good.info().model, "tiny-mha")
                self.assertEqual(len(good.generate("a key", seed=3).images()), 1)
            with Client(server.target, root_certificates=cert) as keyless:
                with self.assertRaises(self.argen_client.ArgenError) as caught:
                    keyless.info()
                self.assertEqual(caught.exception.code.name, "UNAUTHENTICATED")
            with Client(server.target, root_certificates=cert, api_key="wrong") as wrong:
                with self.assertRaises(self.argen_client.ArgenError) as caught:
                    wrong.generate("x").images()
                self.assertEqual(caught.exception.code.name, "UNAUTHENTICATED")
            with Client(server.target, api_key="py-secret", timeout=5) as plaintext:
                with self.assertRaises(self.argen_client.ArgenError) as caught:
                    plaintext.info()
                self.assertEqual(caught.exception.code.name, "UNAVAILABLE")
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
