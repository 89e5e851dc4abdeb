"""A typed Python client for Mnemo's agent API.

from mnemo_client import MnemoClient
MnemoClient("http://localhost:8000", token="mnemo_…").create_memory("name", "Ada")
"""

from mnemo_client._tools import TOOL_NAMES
from mnemo_client.client import MnemoClient
from mnemo_client.errors import (
    AuthenticationError,
    Conflict,
    InvalidRequest,
    MnemoConnectionError,
    MnemoError,
    NotFound,
    PermissionDenied,
    RateLimited,
    SecretRefused,
    ServiceUnavailable,
)

__all__ = [
    "TOOL_NAMES",
    "AuthenticationError",
    "Conflict",
    "InvalidRequest",
    "MnemoClient",
    "MnemoConnectionError",
    "MnemoError",
    "NotFound",
    "PermissionDenied",
    "RateLimited",
    "SecretRefused",
    "ServiceUnavailable",
]
