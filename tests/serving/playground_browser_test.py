"""The playground page (GET /) in a real headless browser: Debian's chromium
loads it from argen_server (tests/goldens/tiny/tiny-mha, CPU), submits a
generation through the page's own form code (?...&run=1) and must end with
the final images painted (decoded by the browser) and the request's metrics
shown. The browser is driven over the DevTools protocol on a pipe.

Exit 77 (ctest: Skipped, with the reason printed) when chromium is not
installed, unless ARGEN_REQUIRE_BROWSER=1 (CI sets it: there it must run).
--screenshot FILE also saves a screenshot (docs/images/playground.png).

Environment: ARGEN_SERVER_BIN, ARGEN_SOURCE_DIR.
"""
import argparse
import base64
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SOURCE = os.environ.get("ARGEN_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SERVER = os.environ.get("ARGEN_SERVER_BIN", "")
MODEL = os.path.join(SOURCE, "tests", "goldens", "tiny", "tiny-mha")
QUERY = "?prompt=a%20red%20square%20on%20blue&seed=7&n=2&policy=diagonal&sparsity=0.5&run=1"


class DevTools:
    """Chromium driven over --remote-debugging-pipe (fd 3: commands in, fd 4:
    replies out; JSON messages ending in a NUL byte): no extra packages."""

    def __init__(self, workdir):
        def high(fd):  # out of the way of fds 3 and 4, which the child's pipe ends take
            moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
            os.close(fd)
            return moved

        to_browser_r, self._to_browser = map(high, os.pipe())
        self._from_browser, from_browser_w = map(high, os.pipe())

        def wire_fds():  # in the child: the pipe ends on fds 3 and 4
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.process = subprocess.Popen(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
             "--remote-debugging-pipe", "--user-data-dir=" + os.path.join(workdir, "profile"),
             "--window-size=1100,760", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "chromium.log"), "w"),
            preexec_fn=wire_fds, pass_fds=(3, 4))  # kept open after preexec_fn
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next_id = 0
        self._buffer = b""

    def call(self, method, params=None, session=None):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed its debugging pipe")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError("%s: %s" % (method, reply["error"]))
                return reply["result"]

    def close(self):
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


# What the page shows, read in the page: its state, the final images decoded
# (naturalWidth > 0), the metrics' labels, the status line.
PAGE_STATE = """JSON.stringify({
  state: document.body.dataset.state || "",
  finals: [...document.querySelectorAll("img.final")].filter(
      (i) => i.src.startsWith("data:image/png;base64,") && i.complete && i.naturalWidth > 0).length,
  metrics: [...document.querySelectorAll("#metrics span")].map((s) => s.textContent),
  status: document.getElementById("status").textContent})"""


def start_server(workdir, model):
    log_path = os.path.join(workdir, "server.log")
    log = open(log_path, "w")
    process = subprocess.Popen(
        [SERVER, "--model_dir", model, "--listen_address=127.0.0.1", "--port=0", "--metrics_port=-1",
         "--http_address=127.0.0.1", "--http_port=0", "--threads=1"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline and process.poll() is None:
        with open(log_path) as f:
            m = re.search(r"HTTP API on [0-9.]+:([0-9]+)", f.read())
        if m:
            return process, int(m.group(1)), log_path
        time.sleep(0.02)
    process.kill()
    with open(log_path) as f:
        sys.exit("argen_server did not start:\n" + f.read())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--screenshot", help="also save a screenshot of the finished page here")
    parser.add_argument("--model", default=MODEL, help="model directory (default: the tiny test model)")
    parser.add_argument("--query", default=QUERY, help="the page's address query (fields, run=1)")
    parser.add_argument("--images", type=int, default=2, help="final images the query asks for")
    args = parser.parse_args()
    if shutil.which("chromium") is None:
        reason = "SKIPPED: chromium is not installed (scripts/install-deps.sh installs Debian's chromium)"
        print(reason)
        return 1 if os.environ.get("ARGEN_REQUIRE_BROWSER") == "1" else 77
    if not SERVER:
        sys.exit("ARGEN_SERVER_BIN is not set")
    workdir = tempfile.mkdtemp(prefix="argen_playground_")
    process, port, log_path = start_server(workdir, args.model)
    browser = None
    try:
        url = "http://127.0.0.1:%d/%s" % (port, args.query)
        browser = DevTools(workdir)
        target = browser.call("Target.createTarget", {"url": url})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = {}
        deadline = time.time() + 240
        while time.time() < deadline:
            value = browser.call("Runtime.evaluate", {"expression": PAGE_STATE, "returnByValue": True},
                                 session)["result"].get("value")
            page = json.loads(value) if value else {}
            if page.get("state") in ("done", "error"):
                break
            time.sleep(0.2)
        print("page: %s" % page)
        ok = (page.get("state") == "done" and page.get("finals") == args.images and
              "time to first image" in page.get("metrics", []) and "KV bytes" in page.get("metrics", []))
        if not ok:
            with open(log_path) as f:
                print(f.read()[-3000:])
            return 1
        if args.screenshot:
            size = browser.call("Page.getLayoutMetrics", {}, session)["cssContentSize"]
            clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
            shot = browser.call("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True},
                                session)["data"]
            with open(args.screenshot, "wb") as f:
                f.write(base64.b64decode(shot))
        print("PASS")
        return 0
    finally:
        if browser is not None:
            browser.close()
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
