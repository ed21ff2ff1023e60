"""Python client for argen_server's gRPC API (argen.v1).

    from argen_client import Client
    with Client("localhost:50051") as client:
        print(client.info().model)
        for event in client.generate("a red fox in snow", n=2, seed=7, previews=2):
            if event.kind == "image":
                open(f"fox-{event.data.index}.png", "wb").write(event.data.png)
"""
from argen_client.client import ArgenError, Client, Event, Generation

__all__ = ["ArgenError", "Client", "Event", "Generation"]
