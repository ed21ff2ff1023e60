"""The client: a channel (plaintext or TLS, optionally with an API key) and
the calls Generate (streamed), GetModelInfo and the standard health check."""
from __future__ import annotations

import dataclasses
from typing import Iterator, List, Optional, Sequence, Tuple, Union

import grpc

from argen_client._generated import argen_pb2, argen_pb2_grpc

_PRIORITIES = {
    "low": argen_pb2.PRIORITY_LOW,
    "normal": argen_pb2.PRIORITY_NORMAL,
    "high": argen_pb2.PRIORITY_HIGH,
}

# grpc.health.v1: HealthCheckRequest {string service = 1}, HealthCheckResponse
# {ServingStatus status = 1}. Encoded here so the client needs no health package.
_HEALTH_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


def _encode_health_request(service: str) -> bytes:
    data = service.encode()
    if not data:
        return b""
    if len(data) > 127:
        raise ValueError("service: at most 127 bytes")
    return b"\x0a" + bytes([len(data)]) + data


def _decode_health_status(data: bytes) -> str:
    if not data:  # status 0 is the default, not sent
        return _HEALTH_STATUS[0]
    if data[0] != 0x08 or len(data) < 2:
        raise ArgenError(grpc.StatusCode.INTERNAL, "unreadable health response")
    return _HEALTH_STATUS.get(data[1], str(data[1]))


def _read(value: Union[None, bytes, str]) -> Optional[bytes]:
    """PEM given as bytes, or a path to a file."""
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as f:
        return f.read()


class ArgenError(Exception):
    """A call ended with a gRPC status other than OK; `message` names the field for INVALID_ARGUMENT."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


@dataclasses.dataclass
class Event:
    """One event of a generation, in the server's order: accepted, started,
    progress, preview (data.png: a partial image), image (data.png: a final
    image), metrics. `data` is the argen.v1 message of that kind."""

    kind: str
    data: object


class Generation:
    """A running Generate call: iterate it for Events; cancel() ends it (the
    server frees the request's KV), after which iteration stops."""

    def __init__(self, call):
        self._call = call
        self.cancelled = False
        self.request_id = ""

    def cancel(self) -> None:
        self.cancelled = True
        self._call.cancel()

    def __iter__(self) -> Iterator[Event]:
        try:
            for event in self._call:
                kind = event.WhichOneof("event")
                data = getattr(event, kind)
                if kind == "accepted":
                    self.request_id = data.request_id
                yield Event(kind, data)
        except grpc.RpcError as e:
            if self.cancelled and e.code() == grpc.StatusCode.CANCELLED:
                return
            raise ArgenError(e.code(), e.details() or "") from None

    def images(self) -> List[bytes]:
        """Runs the generation to its end; the final PNGs by image index."""
        out = {}
        for event in self:
            if event.kind == "image":
                out[event.data.index] = event.data.png
        return [out[i] for i in sorted(out)]


class Client:
    """A connection to argen_server's gRPC port.

    target: "host:port". tls: True (system roots), or give root_certificates
    (PEM bytes or a path; implies TLS); client_certificate and client_key for
    mutual TLS. api_key: sent as "authorization: Bearer <key>". timeout:
    seconds per call (None: none)."""

    def __init__(self, target: str = "localhost:50051", *, tls: bool = False,
                 root_certificates: Union[None, bytes, str] = None,
                 client_certificate: Union[None, bytes, str] = None,
                 client_key: Union[None, bytes, str] = None,
                 api_key: Optional[str] = None, timeout: Optional[float] = None,
                 max_message_bytes: int = 64 << 20):
        options = [("grpc.max_receive_message_length", max_message_bytes),
                   ("grpc.max_send_message_length", max_message_bytes)]
        if tls or root_certificates is not None or client_certificate is not None:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read(root_certificates), private_key=_read(client_key),
                certificate_chain=_read(client_certificate))
            self._channel = grpc.secure_channel(target, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._stub = argen_pb2_grpc.ArGenStub(self._channel)
        self._health = self._channel.unary_unary(
            "/grpc.health.v1.Health/Check", request_serializer=None, response_deserializer=None)
        self._metadata: Sequence[Tuple[str, str]] = (("authorization", "Bearer " + api_key),) if api_key else ()
        self._timeout = timeout

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def info(self) -> argen_pb2.ModelInfo:
        """The served model, its enforced limits, sizes, policies and defaults."""
        try:
            return self._stub.GetModelInfo(argen_pb2.GetModelInfoRequest(), metadata=self._metadata,
                                           timeout=self._timeout)
        except grpc.RpcError as e:
            raise ArgenError(e.code(), e.details() or "") from None

    def health(self, service: str = "") -> str:
        """SERVING, NOT_SERVING, ... of the server ("") or a service ("argen.v1.ArGen")."""
        try:
            reply = self._health(_encode_health_request(service), metadata=self._metadata, timeout=self._timeout)
        except grpc.RpcError as e:
            raise ArgenError(e.code(), e.details() or "") from None
        return _decode_health_status(reply)

    def generate(self, prompt: str, *, n: int = 1, seed: Optional[int] = None,
                 size: Optional[Tuple[int, int]] = None, policy: Optional[str] = None,
                 sparsity: Optional[float] = None, cfg_weight: Optional[float] = None,
                 temperature: Optional[float] = None, top_k: Optional[int] = None,
                 top_p: Optional[float] = None, previews: int = 0, priority: Optional[str] = None,
                 request_id: str = "", negative_prompt: Optional[str] = None) -> Generation:
        """Starts a generation; iterate the result for its events (previews and
        images carry PNG bytes in data.png). Unset options take the server's
        defaults (info().ranges)."""
        request = argen_pb2.GenerateRequest(prompt=prompt, num_images=n, previews=previews, request_id=request_id)
        if seed is not None:
            request.seed = seed
        if size is not None:
            request.width, request.height = size
        if policy is not None:
            request.policy.name = policy
        if sparsity is not None:
            request.policy.sparsity = sparsity
        for field, value in (("cfg_weight", cfg_weight), ("temperature", temperature), ("top_k", top_k),
                             ("top_p", top_p)):
            if value is not None:
                setattr(request, field, value)
        if priority is not None:
            if priority not in _PRIORITIES:
                raise ValueError("priority: one of " + ", ".join(_PRIORITIES))
            request.priority = _PRIORITIES[priority]
        if negative_prompt is not None:
            if "negative_prompt" not in argen_pb2.GenerateRequest.DESCRIPTOR.fields_by_name:
                raise ValueError("negative_prompt: this client's proto has no such field")
            request.negative_prompt = negative_prompt
        return Generation(self._stub.Generate(request, metadata=self._metadata, timeout=self._timeout))
