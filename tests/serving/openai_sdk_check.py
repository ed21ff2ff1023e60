"""Drives argen's HTTP API with the official OpenAI Python SDK (test tooling only).

Run by tests/serving/openai_sdk_test.cc against an in-process server over
HTTPS with an API key:
  openai_sdk_check.py BASE_URL API_KEY CA_FILE SIZE MODEL
Prints one line per check and exits 0 when all passed.
"""
import base64
import struct
import sys

import openai


def png_size(data: bytes):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def main() -> int:
    base_url, api_key, ca_file, size, model, alias = sys.argv[1:7]
    want = tuple(int(x) for x in size.split("x"))
    client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0,
                           http_client=openai.DefaultHttpx2Client(verify=ca_file))

    result = client.images.generate(prompt="a red circle above a blue square", n=2, size=size,
                                    response_format="b64_json")
    assert len(result.data) == 2, result
    for image in result.data:
        assert png_size(base64.b64decode(image.b64_json)) == want
    print("generate: 2 PNGs", size)

    stream = client.images.generate(prompt="a red circle", size=size, stream=True, partial_images=2)
    kinds = []
    for event in stream:
        kinds.append(event.type)
        assert png_size(base64.b64decode(event.b64_json)) == want
        if event.type == "image_generation.partial_image":
            assert event.partial_image_index == len(kinds) - 1, event.partial_image_index
    assert kinds == ["image_generation.partial_image"] * 2 + ["image_generation.completed"], kinds
    print("stream:", " ".join(kinds))

    try:
        client.images.generate(prompt="x", size="1024x1024")
        raise AssertionError("a size the model does not make was accepted")
    except openai.BadRequestError as e:
        assert e.status_code == 400 and e.body["param"] == "size", e.body
    print("bad size: 400 param size")

    bad_key = openai.OpenAI(base_url=base_url, api_key="not-the-key", max_retries=0,
                            http_client=openai.DefaultHttpx2Client(verify=ca_file))
    try:
        bad_key.images.generate(prompt="x")
        raise AssertionError("a wrong key was accepted")
    except openai.AuthenticationError as e:
        assert e.status_code == 401
    print("wrong key: 401")

    models = [m.id for m in client.models.list()]
    assert models == [model, alias], models
    print("models:", models)

    # An app that hard-codes a model name and sends fields newer than the server knows.
    result = client.images.generate(model=alias, prompt="a red circle", size=size, quality="high",
                                    extra_body={"safety_identifier": "user-1", "future_field": 1})
    assert len(result.data) == 1, result
    print("alias:", alias, "with newer fields")
    try:
        client.images.generate(model="not-served", prompt="x")
        raise AssertionError("an unknown model was accepted")
    except openai.NotFoundError as e:
        assert e.status_code == 404 and e.body["code"] == "model_not_found", e.body
    print("unknown model: 404 model_not_found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
