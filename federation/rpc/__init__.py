"""fedspread's wire contract: protobuf messages and gRPC services, package `fedspread.v1`.

Sources are the `.proto` files here; `*_pb2.py`, `*_pb2.pyi` and `*_pb2_grpc.py` are generated
from them by `make protos` (`python -m federation.rpc.generate`) and committed, so using them needs
no protoc. Import the generated modules directly, e.g. `from federation.rpc import placement_pb2`.

This package module deliberately imports none of them: the generator itself lives here and must
load even when the generated code is missing or stale.
"""

PROTO_PACKAGE = "fedspread.v1"
"""The protobuf package of every message and service (`fedspread.v1.PlacementService`, ...)."""
