"""gRPC messages and stubs generated from ``matchmaker.proto`` (``make grpc``); the server is
:mod:`mgmatch.app.grpc_server`."""
