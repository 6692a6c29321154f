"""ZooKeeper's error codes as exceptions (the numbers are ZooKeeper's `KeeperException.Code`)."""

from __future__ import annotations


class ZkError(Exception):
    """Base of every zkstub error; `code` is ZooKeeper's numeric error code."""

    code: int = -1

    def __init__(self, message: str = "", *, path: str | None = None) -> None:
        self.path = path
        if not message:
            message = type(self).__name__.removesuffix("Error")
            if path is not None:
                message = f"{message} for {path}"
        super().__init__(message)


class RolledBackError(ZkError):
    """An op of a failed multi that came before the failing op: nothing was applied."""

    code = 0


class SystemZookeeperError(ZkError):
    code = -1


class RuntimeInconsistencyError(ZkError):
    """An op of a failed multi that came after the failing op: it was not tried."""

    code = -2


class DataInconsistencyError(ZkError):
    code = -3


class ConnectionLossError(ZkError):
    """The connection to the server was lost; the request may or may not have been applied."""

    code = -4


class MarshallingError(ZkError):
    code = -5


class UnimplementedError(ZkError):
    code = -6


class OperationTimeoutError(ZkError):
    code = -7


class BadArgumentsError(ZkError):
    """Bad path, bad data size, bad create mode, ..."""

    code = -8


class UnknownSessionError(ZkError):
    code = -12


class NoNodeError(ZkError):
    code = -101


class NoAuthError(ZkError):
    code = -102


class BadVersionError(ZkError):
    code = -103


class NoChildrenForEphemeralsError(ZkError):
    code = -108


class NodeExistsError(ZkError):
    code = -110


class NotEmptyError(ZkError):
    code = -111


class SessionExpiredError(ZkError):
    code = -112


class InvalidACLError(ZkError):
    code = -114


class AuthFailedError(ZkError):
    code = -115


class SessionMovedError(ZkError):
    code = -118


class NoWatcherError(ZkError):
    """remove_watches / check_watches: the session holds no such watch on the path."""

    code = -121


class RequestTimeoutError(ZkError):
    code = -122


class ClosedError(ZkError):
    """The client was closed by its owner (not a ZooKeeper code: -1000 is zkstub's own)."""

    code = -1000


_BY_CODE: dict[int, type[ZkError]] = {
    cls.code: cls
    for cls in (
        RolledBackError,
        SystemZookeeperError,
        RuntimeInconsistencyError,
        DataInconsistencyError,
        ConnectionLossError,
        MarshallingError,
        UnimplementedError,
        OperationTimeoutError,
        BadArgumentsError,
        UnknownSessionError,
        NoNodeError,
        NoAuthError,
        BadVersionError,
        NoChildrenForEphemeralsError,
        NodeExistsError,
        NotEmptyError,
        SessionExpiredError,
        InvalidACLError,
        AuthFailedError,
        SessionMovedError,
        NoWatcherError,
        RequestTimeoutError,
        ClosedError,
    )
}


def error_for_code(code: int, message: str = "", *, path: str | None = None) -> ZkError:
    """The exception instance for a ZooKeeper error code (an unknown code gives a plain
    ZkError carrying that code)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        error = ZkError(message or f"ZooKeeper error {code}", path=path)
        error.code = code
        return error
    return cls(message, path=path)
